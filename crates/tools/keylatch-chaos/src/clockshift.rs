//! Clock faults: builds the `clockshift` preload library (shim/clockshift.c) with the C
//! compiler, gives each process of a run its own shift file, and steps a process's wall clock
//! by rewriting that file. Imports the harness's error type only.
//!
//! Why not libfaketime: Debian's redis-server allocates with jemalloc, and libfaketime cannot
//! start inside a jemalloc process (its lookup of the real `clock_gettime` recurses through
//! jemalloc's initialisation, a known clash in libfaketime). The shim reads the real time with raw
//! system calls instead. It shifts `CLOCK_REALTIME` (and its coarse variant, `gettimeofday`,
//! `time`) only, as an NTP step does; `CLOCK_MONOTONIC` is untouched, and the history's clock
//! ([`crate::clock::now_ns`]) is read with a raw system call, so it is the host's in any case.

use std::io::{Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use crate::HarnessError;

/// The source of the preload library.
const SOURCE: &str = include_str!("../shim/clockshift.c");

/// The built library and the directory of the run's shift files.
#[derive(Debug, Clone)]
pub struct ClockShift {
    library: PathBuf,
    dir: PathBuf,
}

impl ClockShift {
    /// Builds the library into `dir` with `cc`.
    ///
    /// # Errors
    /// `cc` is missing or fails, or `dir` cannot be written.
    pub fn build(dir: &Path) -> Result<ClockShift, HarnessError> {
        let source = dir.join("clockshift.c");
        let library = dir.join("clockshift.so");
        std::fs::write(&source, SOURCE).map_err(|e| HarnessError::Io(e.to_string()))?;
        let out = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&library)
            .arg(&source)
            .output()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => HarnessError::Missing("cc".to_owned()),
                _ => HarnessError::Command(format!("cc: {e}")),
            })?;
        if !out.status.success() {
            return Err(HarnessError::Command(format!(
                "cc clockshift.c: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(ClockShift {
            library,
            dir: dir.to_owned(),
        })
    }

    fn file(&self, process: &str) -> PathBuf {
        self.dir.join(format!("clock-{process}"))
    }

    /// The environment that starts `process` with its own shift, at 0 until [`Self::set`].
    ///
    /// # Errors
    /// The shift file cannot be written.
    pub fn env_for(&self, process: &str) -> Result<Vec<(String, String)>, HarnessError> {
        self.set(process, 0)?;
        Ok(vec![
            (
                "LD_PRELOAD".to_owned(),
                self.library.to_string_lossy().into_owned(),
            ),
            (
                "KLC_CLOCK_FILE".to_owned(),
                self.file(process).to_string_lossy().into_owned(),
            ),
        ])
    }

    /// Sets `process`'s wall clock to the host's plus `shift_ms` (rewritten in place, so the
    /// process's mapping sees it at its next clock read).
    ///
    /// # Errors
    /// The shift file cannot be written.
    pub fn set(&self, process: &str, shift_ms: i64) -> Result<(), HarnessError> {
        let io = |e: std::io::Error| HarnessError::Io(format!("clock shift of {process}: {e}"));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.file(process))
            .map_err(io)?;
        f.seek(SeekFrom::Start(0)).map_err(io)?;
        // Fixed width, so a rewrite never leaves a longer old value's tail behind.
        f.write_all(format!("{shift_ms:+020}\n").as_bytes())
            .map_err(io)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date_under(env: &[(String, String)]) -> i64 {
        let out = std::process::Command::new("date")
            .arg("+%s")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    #[test]
    fn a_shift_steps_a_process_wall_clock_forward_and_back() {
        let dir = std::env::temp_dir().join(format!("keylatch-chaos-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let clocks = ClockShift::build(&dir).unwrap();
        let env = clocks.env_for("c1").unwrap();
        let host = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64
        };
        // Slack of a few seconds for a loaded machine; the steps are a day.
        assert!((date_under(&env) - host()).abs() < 5);
        clocks.set("c1", 86_400_000).unwrap();
        assert!((date_under(&env) - host() - 86_400).abs() < 5);
        clocks.set("c1", -86_400_000).unwrap();
        assert!((date_under(&env) - host() + 86_400).abs() < 5);
        clocks.set("c1", 0).unwrap();
        assert!((date_under(&env) - host()).abs() < 5);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
