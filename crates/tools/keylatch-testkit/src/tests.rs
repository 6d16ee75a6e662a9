//! Unit tests; they start real `redis-server` processes.

use std::io;
use std::net::{Ipv4Addr, TcpStream};
use std::thread;

use crate::server::start_with;
use crate::{RedisServer, redis_server_available};

mod cluster;

fn require_redis() {
    assert!(
        redis_server_available(),
        "redis-server is not on PATH; run ./scripts/setup.sh"
    );
}

fn process_alive(pid: u32) -> bool {
    // A zombie still has /proc/PID; its state letter is 'Z'.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[test]
fn start_gives_working_server() {
    require_redis();
    let server = RedisServer::start().unwrap();
    assert_eq!(server.host(), "127.0.0.1");
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));
    assert!(server.dir().is_dir());
    assert!(server.dir().join("redis.log").is_file());
    assert_eq!(server.cli(&["PING"]).unwrap(), "PONG");
    assert_eq!(server.cli(&["CONFIG", "GET", "save"]).unwrap(), "save\n");
    assert_eq!(
        server.cli(&["CONFIG", "GET", "appendonly"]).unwrap(),
        "appendonly\nno"
    );
    let info = server.cli(&["INFO", "server"]).unwrap();
    assert!(
        info.contains(&format!("process_id:{}", server.pid())),
        "{info}"
    );
}

#[test]
fn two_servers_at_once_are_independent() {
    require_redis();
    let handles: Vec<_> = (0..2)
        .map(|_| thread::spawn(|| RedisServer::start().unwrap()))
        .collect();
    let servers: Vec<RedisServer> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let (a, b) = (&servers[0], &servers[1]);
    assert_ne!(a.port(), b.port());
    assert_ne!(a.pid(), b.pid());
    assert_ne!(a.dir(), b.dir());
    a.cli(&["SET", "k", "from-a"]).unwrap();
    assert_eq!(b.cli(&["GET", "k"]).unwrap(), "(nil)");
    assert_eq!(a.cli(&["GET", "k"]).unwrap(), "from-a");
}

#[test]
fn many_servers_in_parallel() {
    require_redis();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            thread::spawn(move || {
                let s = RedisServer::start().unwrap();
                s.cli(&["SET", "i", &i.to_string()]).unwrap();
                assert_eq!(s.cli(&["GET", "i"]).unwrap(), i.to_string());
                s.port()
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn cli_renders_replies() {
    require_redis();
    let s = RedisServer::start().unwrap();
    assert_eq!(
        s.cli(&["SET", "key with space", "va\r\nlue"]).unwrap(),
        "OK"
    );
    assert_eq!(s.cli(&["GET", "key with space"]).unwrap(), "va\r\nlue");
    assert_eq!(s.cli(&["GET", "missing"]).unwrap(), "(nil)");
    assert_eq!(s.cli(&["INCRBY", "n", "41"]).unwrap(), "41");
    assert_eq!(s.cli(&["RPUSH", "l", "a", "b", "c"]).unwrap(), "3");
    assert_eq!(s.cli(&["LRANGE", "l", "0", "-1"]).unwrap(), "a\nb\nc");
    assert_eq!(s.cli(&["LRANGE", "nothing", "0", "-1"]).unwrap(), "");
    assert_eq!(s.cli(&["SET", "e", ""]).unwrap(), "OK");
    assert_eq!(s.cli(&["GET", "e"]).unwrap(), "");
    assert_eq!(
        s.cli(&["EVAL", "return {1, 'x', false}", "0"]).unwrap(),
        "1\nx\n(nil)"
    );
    let err = s.cli(&["INCR", "l"]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::Other);
    assert!(err.to_string().starts_with("WRONGTYPE"), "{err}");
    let err = s.cli(&["NOSUCHCOMMAND"]).unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
    assert_eq!(s.cli(&[]).unwrap_err().kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn debug_command_needs_enable_debug() {
    require_redis();
    let plain = RedisServer::start().unwrap();
    assert!(plain.cli(&["DEBUG", "SLEEP", "0"]).is_err());
    let debug = RedisServer::builder().enable_debug(true).start().unwrap();
    assert_eq!(debug.cli(&["DEBUG", "SLEEP", "0"]).unwrap(), "OK");
}

#[test]
fn extra_args_are_passed() {
    require_redis();
    let s = RedisServer::builder()
        .arg("--maxmemory")
        .arg("12345678")
        .start()
        .unwrap();
    assert_eq!(
        s.cli(&["CONFIG", "GET", "maxmemory"]).unwrap(),
        "maxmemory\n12345678"
    );
}

#[test]
fn bad_args_give_error_with_log() {
    require_redis();
    let err = RedisServer::builder()
        .arg("--no-such-option")
        .arg("1")
        .start()
        .unwrap_err();
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(msg.contains("exited during startup"), "{msg}");
    assert!(msg.contains("no-such-option"), "log tail missing: {msg}");
}

#[test]
fn restart_loses_data_and_keeps_port_and_options() {
    require_redis();
    let mut s = RedisServer::builder().enable_debug(true).start().unwrap();
    let (port, pid, dir) = (s.port(), s.pid(), s.dir().to_path_buf());
    s.cli(&["SET", "k", "v"]).unwrap();
    // An open client connection must not stop the new server from binding.
    let client = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    // Even an explicit dump must not survive a restart.
    s.cli(&["SAVE"]).unwrap();
    assert!(dir.join("dump.rdb").is_file());
    s.restart().unwrap();
    assert_eq!(s.port(), port);
    assert_eq!(s.dir(), dir);
    assert_ne!(s.pid(), pid);
    assert!(!process_alive(pid));
    assert_eq!(s.cli(&["GET", "k"]).unwrap(), "(nil)");
    assert_eq!(s.cli(&["DBSIZE"]).unwrap(), "0");
    assert_eq!(s.cli(&["DEBUG", "SLEEP", "0"]).unwrap(), "OK");
    drop(client);
}

#[test]
fn kill_is_idempotent_then_restart_and_start_work() {
    require_redis();
    let mut s = RedisServer::start().unwrap();
    let pid = s.pid();
    s.kill();
    s.kill();
    assert!(!process_alive(pid));
    assert!(s.cli(&["PING"]).is_err());
    assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, s.port())).is_err());
    let other = RedisServer::start().unwrap();
    assert_eq!(other.cli(&["PING"]).unwrap(), "PONG");
    s.restart().unwrap();
    assert_eq!(s.cli(&["PING"]).unwrap(), "PONG");
}

#[test]
fn drop_kills_process_and_removes_dir() {
    require_redis();
    let s = RedisServer::start().unwrap();
    let (pid, dir, port) = (s.pid(), s.dir().to_path_buf(), s.port());
    drop(s);
    assert!(!process_alive(pid));
    assert!(!dir.exists());
    assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
    // Dropping a killed server is fine too.
    let mut s = RedisServer::start().unwrap();
    s.kill();
    drop(s);
}

#[test]
fn missing_binary_says_run_setup() {
    let err = start_with(RedisServer::builder(), "keylatch-no-such-redis-server").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert!(err.to_string().contains("./scripts/setup.sh"), "{err}");
}

/// Run in a child process by `watchdog_kills_leaked_server`: leaks a server
/// and exits without dropping it.
#[test]
#[ignore = "helper for watchdog_kills_leaked_server"]
fn watchdog_helper_leak_server() {
    if std::env::var_os("KEYLATCH_TESTKIT_LEAK_HELPER").is_none() {
        return;
    }
    let server = RedisServer::start().unwrap();
    println!("LEAKED_PID={}", server.pid());
    println!("LEAKED_DIR={}", server.dir().display());
    std::mem::forget(server);
    std::process::exit(0);
}

#[test]
fn watchdog_kills_leaked_server() {
    require_redis();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::watchdog_helper_leak_server",
            "--ignored",
            "--nocapture",
        ])
        .env("KEYLATCH_TESTKIT_LEAK_HELPER", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pid: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("LEAKED_PID="))
        .unwrap_or_else(|| panic!("helper printed no pid: {stdout}"))
        .parse()
        .unwrap();
    let dir = stdout
        .lines()
        .find_map(|l| l.strip_prefix("LEAKED_DIR="))
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while process_alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "leaked redis {pid} still alive"
        );
        thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn tls_server_serves_tls_only_and_the_testkit_reaches_it() {
    require_redis();
    if crate::skip_without_tls() {
        return;
    }
    let tls = crate::TlsFiles::generate().unwrap();
    for path in [
        tls.ca_file(),
        tls.server_cert_file(),
        tls.server_key_file(),
        tls.client_cert_file(),
        tls.client_key_file(),
    ] {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("-----BEGIN"), "{}", path.display());
    }
    let server = RedisServer::builder()
        .tls(&tls, crate::ClientAuth::Required)
        .start()
        .unwrap();
    assert!(server.is_tls());
    assert_eq!(
        server.url(),
        format!("rediss://127.0.0.1:{}", server.port())
    );
    assert_eq!(server.cli(&["PING"]).unwrap(), "PONG");
    assert_eq!(server.cli(&["CONFIG", "GET", "port"]).unwrap(), "port\n0");
    assert_eq!(
        server.cli(&["CONFIG", "GET", "tls-auth-clients"]).unwrap(),
        "tls-auth-clients\nyes"
    );
    // A plaintext PING on the TLS port gets no PONG.
    let plain = crate::resp::request_to(
        &crate::resp::Target::Tcp((Ipv4Addr::LOCALHOST, server.port()).into()),
        None,
        &["PING"],
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(1),
    );
    assert!(
        !matches!(plain, Ok(crate::resp::Reply::Simple(ref s)) if s == "PONG"),
        "{plain:?}"
    );
}

#[test]
fn password_stays_out_of_argv_and_debug() {
    require_redis();
    let secret = "s3cret \"quoted\" pw";
    let builder = RedisServer::builder().password(secret);
    assert!(!format!("{builder:?}").contains("s3cret"));
    let server = builder.start().unwrap();
    assert_eq!(server.cli(&["PING"]).unwrap(), "PONG");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.pid())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("s3cret"));
    assert!(!format!("{server:?}").contains("s3cret"));
    // Without the password the server refuses.
    let anonymous = crate::resp::request_to(
        &crate::resp::Target::Tcp((Ipv4Addr::LOCALHOST, server.port()).into()),
        None,
        &["GET", "k"],
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(1),
    )
    .unwrap();
    assert!(
        matches!(&anonymous, crate::resp::Reply::Error(e) if e.starts_with("NOAUTH")),
        "{anonymous:?}"
    );
}

#[test]
fn sentinel_set_links_up_and_fails_over() {
    require_redis();
    let set = crate::SentinelSet::builder()
        .password("data-pw")
        .sentinel_password("sentinel-pw")
        .start()
        .unwrap();
    assert_eq!(set.nodes().len(), 3);
    assert_eq!(set.sentinels().len(), 3);
    assert!(set.url().starts_with("redis+sentinel://127.0.0.1:"));
    assert!(set.url().ends_with("/keylatch"));
    let before = set.primary_port().unwrap();
    assert_eq!(before, set.nodes()[0].port());
    set.primary().unwrap().cli(&["SET", "k", "v"]).unwrap();
    let took = set.failover().unwrap();
    let after = set.primary_port().unwrap();
    println!("failover from {before} to {after} took {took:?}");
    assert_ne!(after, before);
    assert_eq!(set.primary().unwrap().cli(&["GET", "k"]).unwrap(), "v");
    let role = set.nodes()[0].cli(&["ROLE"]).unwrap();
    assert!(role.starts_with("slave"), "{role}");
}

#[test]
fn tls_sentinel_set_links_up() {
    require_redis();
    if crate::skip_without_tls() {
        return;
    }
    let files = std::sync::Arc::new(crate::TlsFiles::generate().unwrap());
    let set = crate::SentinelSet::builder()
        .tls(files)
        .password("data-pw")
        .start()
        .unwrap();
    assert!(set.url().starts_with("rediss+sentinel://127.0.0.1:"));
    for node in set.nodes() {
        assert!(node.is_tls());
        assert_eq!(node.cli(&["CONFIG", "GET", "port"]).unwrap(), "port\n0");
    }
    assert!(set.sentinels().iter().all(|s| s.is_tls()));
    let took = set.failover().unwrap();
    println!("TLS set: failover took {took:?}");
}

#[test]
fn servers_run_the_selected_build() {
    require_redis();
    let build = crate::server_build().unwrap();
    assert!(!build.version().is_empty(), "{build:?}");
    let server = RedisServer::start().unwrap();
    let info = server.cli(&["INFO", "server"]).unwrap();
    // Valkey also reports a redis_version (7.2.4, for compatibility): read its own field.
    let field = format!("{}_version:", build.flavor());
    let version = info
        .lines()
        .find_map(|l| l.trim().strip_prefix(field.as_str()))
        .unwrap_or_else(|| panic!("no {field} in INFO server: {info}"));
    assert_eq!(version, build.version(), "{}", build.describe());
}

#[test]
fn the_build_banner_is_parsed() {
    use crate::build::parse_banner;
    let pairs = [
        (
            "Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64 build=1536df31c0395150",
            ("valkey", "9.1.2"),
        ),
        (
            "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d7c971a948f0",
            ("redis", "7.0.15"),
        ),
        ("something else", ("unknown", "")),
    ];
    for (banner, (flavor, version)) in pairs {
        let (f, v) = parse_banner(banner);
        assert_eq!((f.as_str(), v.as_str()), (flavor, version), "{banner}");
    }
}

#[test]
fn a_build_without_tls_is_recognised_by_what_it_says() {
    use crate::build::says_no_tls;
    // Redis 7.2+ and Valkey built without TLS.
    assert!(says_no_tls(
        "1:M * Running mode=standalone, port=1.\n1:M # Missing implement of connection type tls\n1:M # Failed finding TLS support.\n"
    ));
    // Redis 7.0 built without TLS.
    assert!(says_no_tls(
        "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\n>>> 'tls-port \"1\"'\nBad directive or wrong number of arguments\n"
    ));
    // A build with TLS refusing certificate files that do not exist.
    assert!(!says_no_tls(
        "1:M # Failed to load certificate: missing.pem\n1:M # Failed to configure TLS. Check logs for more info.\n"
    ));
}

#[test]
fn the_probed_tls_capability_matches_a_real_tls_start() {
    require_redis();
    let build = crate::server_build().unwrap();
    let files = crate::TlsFiles::generate().unwrap();
    let started = RedisServer::builder()
        .tls(&files, crate::ClientAuth::Optional)
        .start();
    assert_eq!(
        started.is_ok(),
        build.tls(),
        "{}: {:?}",
        build.describe(),
        started.err()
    );
}

mod postgres {
    use crate::{PostgresServer, postgres_available};

    #[test]
    fn start_serves_and_drop_removes_everything() {
        assert!(
            postgres_available(),
            "PostgreSQL is not installed; run ./scripts/setup.sh"
        );
        let server = PostgresServer::start().expect("start postgres");
        assert_eq!(server.psql("SELECT 1 + 1").unwrap(), "2");
        // Trust on loopback only, and the server runs unprivileged.
        assert_eq!(server.psql("SHOW listen_addresses").unwrap(), "127.0.0.1");
        let pid = server.pid().expect("postmaster pid");
        let dir = std::path::PathBuf::from(
            server
                .psql("SHOW data_directory")
                .unwrap()
                .trim_end_matches("/data"),
        );
        assert!(dir.is_dir());
        drop(server);
        assert!(!super::process_alive(pid), "postgres {pid} still runs");
        assert!(!dir.exists(), "{} still exists", dir.display());
    }

    #[test]
    fn restart_keeps_data() {
        let mut server = PostgresServer::start().expect("start postgres");
        server
            .psql("CREATE TABLE t (x int); INSERT INTO t VALUES (7)")
            .unwrap();
        server.restart().expect("restart");
        assert_eq!(server.psql("SELECT x FROM t").unwrap(), "7");
    }
}
