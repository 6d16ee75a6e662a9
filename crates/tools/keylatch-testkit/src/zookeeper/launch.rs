//! Starting one ZooKeeper JVM and knowing it answers as itself; four-letter words; temp
//! dirs and log tails.

use super::*;

/// The value of the `Mode:` line of a `srvr` answer.
pub(super) fn mode_of(srvr: &str) -> Option<String> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(|m| m.trim().to_owned())
}

/// Sends a four-letter word to `127.0.0.1:port` and reads the answer to the end.
pub(super) fn four_letter_word(port: u16, word: &str) -> io::Result<String> {
    if word.len() != 4 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a four-letter word is four ascii lower-case letters",
        ));
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    stream.set_write_timeout(Some(Duration::from_secs(3)))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

pub(super) fn make_temp_dir() -> io::Result<PathBuf> {
    // Kept (not deleted on drop): the server owns the directory and removes it when it stops.
    let dir = tempfile::Builder::new()
        .prefix(&format!("keylatch-zookeeper-{}-", std::process::id()))
        .tempdir()
        .map(tempfile::TempDir::keep)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create a temp dir: {e}")))?;
    // The JVM reports its working directory resolved; compare like with like.
    Ok(fs::canonicalize(&dir).unwrap_or(dir))
}

pub(super) fn log_tail(dir: &Path, from: u64) -> String {
    let path = dir.join(LOG_FILE);
    format!("--- {} (tail) ---\n{}", path.display(), tail(&path, from))
}

/// Spawns the JVM for the server in `dir` and waits until it answers four-letter words
/// as itself (`envi` shows `user.dir` = `dir`, so not another process on the port). A TLS
/// server (`secureClientPort`, no plain port) is waited for by its log instead.
pub(super) fn launch(dir: &Path, main_class: &str) -> Result<Launched, LaunchError> {
    let fatal = LaunchError::Fatal;
    let config = fs::read_to_string(dir.join(CONFIG_FILE)).map_err(fatal)?;
    let secure = config.lines().any(|l| l.starts_with("secureClientPort="));
    let port: u16 = config
        .lines()
        .find_map(|l| {
            l.strip_prefix("clientPort=")
                .or_else(|| l.strip_prefix("secureClientPort="))
        })
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| fatal(io::Error::other("no clientPort in zoo.cfg")))?;
    let log_path = dir.join(LOG_FILE);
    // Only the part of the log written by this attempt is inspected.
    let log_start = file_len(&log_path);
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(fatal)?;
    let mut class_path = format!("{ZK_CONF_DIR}:{ZK_JAR}");
    if Path::new(SLF4J_SIMPLE_JAR).is_file() {
        class_path.push(':');
        class_path.push_str(SLF4J_SIMPLE_JAR);
    }
    if secure {
        // Netty's TLS handler needs these; the server jar's manifest does not list them.
        for jar in super::secure::NETTY_JARS {
            class_path.push(':');
            class_path.push_str(jar);
        }
    }
    let mut child = Command::new(JAVA_BIN)
        .args([
            "-Xms16m",
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            // Reconnect to a restarted peer quickly (default 5 s per attempt).
            "-Dzookeeper.cnxTimeout=1000",
            // Reap empty container nodes every second (default every 60 s), without the
            // default cap of 10 000 a minute, so tests can see lock directories go.
            "-Dznode.container.checkIntervalMs=1000",
            "-Dznode.container.maxPerMinute=6000000",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            &class_path,
            main_class,
        ])
        .arg(dir.join(CONFIG_FILE))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(fatal)?)
        .stderr(log)
        .spawn()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => LaunchError::Fatal(not_installed()),
            _ => LaunchError::Fatal(e),
        })?;
    let pid = child.id();
    let own_dir = format!("user.dir={}", dir.display());
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().map_err(fatal)? {
            let logs = log_tail(dir, log_start);
            let msg = format!("ZooKeeper on port {port} exited during startup ({status})\n{logs}");
            return Err(if logs.contains("Address already in use") {
                LaunchError::PortTaken(io::Error::new(io::ErrorKind::AddrInUse, msg))
            } else {
                LaunchError::Fatal(io::Error::other(msg))
            });
        }
        if secure {
            if super::secure::serving(dir, log_start, port) {
                let watchdog = spawn_watchdog(pid);
                return Ok(Launched { child, watchdog });
            }
        } else if let Ok(envi) = four_letter_word(port, "envi") {
            if envi.lines().any(|l| l.trim() == own_dir) {
                let watchdog = spawn_watchdog(pid);
                return Ok(Launched { child, watchdog });
            }
            if envi.contains("user.dir=") {
                // Another server holds the port; ours will fail.
                let _ = child.kill();
                let _ = child.wait();
                return Err(LaunchError::PortTaken(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("port {port} is already served by another ZooKeeper"),
                )));
            }
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LaunchError::Fatal(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "ZooKeeper (pid {pid}) did not answer on port {port} within {}s\n{}",
                    READY_TIMEOUT.as_secs(),
                    log_tail(dir, log_start)
                ),
            )));
        }
        thread::sleep(Duration::from_millis(50));
    }
}
