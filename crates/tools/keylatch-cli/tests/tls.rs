//! The CLI over TLS: `run` and `inspect` against a TLS-only server with mutual TLS, the
//! certificates given by flags (redis-cli's names) or by the environment; an untrusted server
//! certificate exits 69 with a message that says TLS verification failed.
mod common;

use std::process::Stdio;

use common::{bare, json_output, scratch, wait_for_file};
use keylatch_testkit::{ClientAuth, RedisServer, TlsFiles};

fn path(p: std::path::PathBuf) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn run_and_inspect_over_mutual_tls() {
    if keylatch_testkit::skip_without_tls() {
        return;
    }
    let files = TlsFiles::generate().unwrap();
    let server = RedisServer::builder()
        .tls(&files, ClientAuth::Required)
        .start()
        .unwrap();
    let dir = scratch("tls");
    let marker = dir.join("running");
    // `--tls` turns the plain URL into rediss://; the certificates come from redis-cli's flags.
    let plain_url = server.url().replacen("rediss://", "redis://", 1);
    let (ca, cert, key) = (
        path(files.ca_file()),
        path(files.client_cert_file()),
        path(files.client_key_file()),
    );
    let mut holder = bare(&[
        "--redis",
        &plain_url,
        "--tls",
        "--cacert",
        &ca,
        "--cert",
        &cert,
        "--key",
        &key,
        "run",
        "tls-job",
        "--",
        "sh",
        "-c",
        &format!("touch {}; sleep 3", marker.display()),
    ])
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for_file(&marker);
    // inspect, with the certificates from the environment variables the library reads.
    let out = bare(&["--redis", &server.url(), "inspect", "tls-job", "--json"])
        .env("KEYLATCH_TLS_CA", &ca)
        .env("KEYLATCH_TLS_CERT", &cert)
        .env("KEYLATCH_TLS_KEY", &key)
        .output()
        .unwrap();
    let report = json_output(&out);
    assert_eq!(report["primitive"], "reentrant", "{report}");
    assert_eq!(report["locked"], true, "{report}");
    let status = holder.wait().unwrap();
    assert!(status.success(), "run over TLS: {status}");
    assert_eq!(server.cli(&["EXISTS", "tls-job"]).unwrap(), "0", "released");
}

#[test]
fn an_untrusted_server_certificate_exits_69() {
    if keylatch_testkit::skip_without_tls() {
        return;
    }
    let files = TlsFiles::generate().unwrap();
    let other = TlsFiles::generate().unwrap();
    let server = RedisServer::builder()
        .tls(&files, ClientAuth::No)
        .start()
        .unwrap();
    for extra in [vec!["--cacert".to_owned(), path(other.ca_file())], vec![]] {
        let mut args = vec!["--redis".to_owned(), server.url()];
        args.extend(extra.iter().cloned());
        args.extend(["run", "tls-untrusted", "--", "true"].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = bare(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("{extra:?}: exit {:?}: {}", out.status.code(), stderr.trim());
        assert_eq!(out.status.code(), Some(69), "{stderr}");
        assert!(stderr.contains("TLS verification failed"), "{stderr}");
    }
    // --insecure skips verification, and says so.
    let out = bare(&[
        "--redis",
        &server.url(),
        "--insecure",
        "run",
        "tls-insecure",
        "--",
        "true",
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("warning"), "{stderr}");
}
