//! `keylatch serve --http 127.0.0.1:PORT`: the operators' view as a read-only web page that
//! refreshes itself, and `/metrics` for Prometheus. Loopback only unless `--allow-remote`.

use std::sync::{Arc, Mutex};

use keylatch::{Client, Config};

use crate::failure::{EX_UNAVAILABLE, EX_USAGE, Failure};
use crate::serve_page::{fragment, metrics, page};
use crate::view::{Snapshot, Watcher};
use crate::view_args::ServeArgs;

type Shared = Arc<Mutex<Result<Snapshot, String>>>;

/// Serves until SIGINT or SIGTERM.
pub async fn serve(config: Config, args: ServeArgs) -> Result<(), Failure> {
    if !args.http.ip().is_loopback() && !args.allow_remote {
        return Err(Failure::new(
            EX_USAGE,
            format!(
                "--http {} is not a loopback address: add --allow-remote to serve it there",
                args.http
            ),
        ));
    }
    let client = Client::connect_with(config).await?;
    if client.as_zookeeper().is_some() {
        return Err(Failure::new(
            EX_USAGE,
            "serve reads Redis only for now (ZooKeeper: use `keylatch inspect`)",
        ));
    }
    let mut conn = client.connection().await?;
    let mut watcher = Watcher::new(&args.pattern, &client.config().key_prefix);
    let first = watcher.refresh(&mut conn).await.map_err(|f| f.message);
    let shared: Shared = Arc::new(Mutex::new(first));
    let server = tiny_http::Server::http(args.http).map_err(|err| {
        Failure::new(
            EX_UNAVAILABLE,
            format!("cannot listen on {}: {err}", args.http),
        )
    })?;
    let server = Arc::new(server);
    // The address as bound (port 0 picks one): the first line on stdout, for scripts.
    let bound = server
        .server_addr()
        .to_ip()
        .map_or_else(|| args.http.to_string(), |a| a.to_string());
    println!("serving http://{bound}/");
    let every_ms = args.every.as_millis();
    let listener = {
        let (server, shared) = (server.clone(), shared.clone());
        std::thread::spawn(move || answer_all(&server, &shared, every_ms))
    };
    let stop = crate::run::interrupted();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = tokio::time::sleep(args.every) => {}
            () = &mut stop => break,
        }
        let view = watcher.refresh(&mut conn).await;
        if let Ok(mut slot) = shared.lock() {
            *slot = view.map_err(|f| f.message);
        }
    }
    server.unblock();
    let _ = listener.join();
    let _ = client.shutdown().await;
    Ok(())
}

fn answer_all(server: &tiny_http::Server, shared: &Shared, every_ms: u128) {
    for request in server.incoming_requests() {
        let view = shared
            .lock()
            .map(|v| v.clone())
            .unwrap_or_else(|_| Err("the view is unavailable".to_owned()));
        let path = request.url().split('?').next().unwrap_or("/").to_owned();
        let (status, kind, body) = if *request.method() != tiny_http::Method::Get
            && *request.method() != tiny_http::Method::Head
        {
            (405, "text/plain; charset=utf-8", "read-only\n".to_owned())
        } else {
            match path.as_str() {
                "/" => (200, "text/html; charset=utf-8", page(&view, every_ms)),
                "/fragment" => (200, "text/html; charset=utf-8", fragment(&view)),
                "/api/view" => (
                    200,
                    "application/json",
                    match &view {
                        Ok(s) => serde_json::to_string(s).unwrap_or_default(),
                        Err(e) => serde_json::json!({ "error": e }).to_string(),
                    },
                ),
                "/metrics" => (
                    200,
                    "text/plain; version=0.0.4; charset=utf-8",
                    metrics(&view),
                ),
                _ => (404, "text/plain; charset=utf-8", "not found\n".to_owned()),
            }
        };
        let mut response = tiny_http::Response::from_string(body).with_status_code(status);
        for (name, value) in [
            ("Content-Type", kind),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            (
                "Content-Security-Policy",
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
            ),
        ] {
            if let Ok(header) = tiny_http::Header::from_bytes(name, value) {
                response.add_header(header);
            }
        }
        let _ = request.respond(response);
    }
}
