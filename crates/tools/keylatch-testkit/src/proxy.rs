//! A TCP proxy that injects network faults between a client and a server (Redis, or a
//! ZooKeeper server: it forwards bytes, whatever the protocol).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to traffic, from the moment it is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Forward everything.
    Pass,
    /// Forward everything, each chunk held back this long (both directions).
    Delay(Duration),
    /// Forward nothing, in either direction, and keep connections open: a network partition.
    Blackhole,
    /// Forward requests to the server but drop its replies: the command runs, the client never
    /// learns its outcome.
    DropReplies,
    /// Close new connections at once (existing ones keep their current behaviour).
    Refuse,
    /// Hold back the requests of the connections open when it is set, and drop their replies;
    /// connections opened later pass. The held requests reach the server, in order, once the
    /// fault changes, even when the client closed the connection meanwhile (then the server
    /// gets the close after them): what TCP does with a request sent during a partition, which
    /// it retransmits after the heal.
    Stall,
}

/// A TCP proxy on a free loopback port in front of `upstream`, run by its own thread, so both
/// synchronous and async tests can drive it. Stopped on drop.
///
/// ```no_run
/// use std::time::Duration;
/// use keylatch_testkit::{Fault, FaultProxy, RedisServer};
///
/// let server = RedisServer::start()?;
/// let proxy = FaultProxy::start(server.port())?;
/// // Point the client at proxy.url() instead of server.url(), then:
/// proxy.set(Fault::Delay(Duration::from_millis(50)));
/// proxy.set(Fault::Blackhole);
/// proxy.reset_connections();
/// proxy.set(Fault::Pass);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    fault: Arc<watch::Sender<Fault>>,
    resets: Arc<watch::Sender<u64>>,
    stop: Arc<watch::Sender<bool>>,
    open: Arc<AtomicUsize>,
    serials: Arc<Serials>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Connection numbers, for [`Fault::Stall`].
#[derive(Debug, Default)]
struct Serials {
    /// The number of the next connection.
    next: AtomicU64,
    /// Connections numbered below this one are stalled while the fault is `Stall`.
    stall_below: AtomicU64,
    /// Connections with requests held back, neither delivered nor dropped yet.
    holding: AtomicUsize,
}

impl FaultProxy {
    /// Starts a proxy to `127.0.0.1:upstream_port`.
    ///
    /// # Errors
    /// When no loopback port can be bound or the thread cannot start.
    pub fn start(upstream_port: u16) -> io::Result<FaultProxy> {
        let upstream = SocketAddr::from(([127, 0, 0, 1], upstream_port));
        // Bound here, so the port is known at once; served by a runtime of the proxy's own
        // thread, so this works from synchronous code and from inside a tokio runtime alike.
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let fault = Arc::new(watch::channel(Fault::Pass).0);
        let resets = Arc::new(watch::channel(0u64).0);
        let stop = Arc::new(watch::channel(false).0);
        let open = Arc::new(AtomicUsize::new(0));
        let serials = Arc::new(Serials::default());
        let state = State {
            upstream,
            fault: fault.clone(),
            resets: resets.clone(),
            open: open.clone(),
            serials: serials.clone(),
        };
        let mut stopped = stop.subscribe();
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{}", addr.port()))
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(std_listener) else {
                        return;
                    };
                    tokio::select! {
                        () = accept_loop(listener, state) => {}
                        _ = stopped.wait_for(|s| *s) => {}
                    }
                });
            })?;
        Ok(FaultProxy {
            addr,
            fault,
            resets,
            stop,
            open,
            serials,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.addr.port())
    }

    /// Sets the fault for all traffic from now on.
    pub fn set(&self, fault: Fault) {
        if fault == Fault::Stall {
            let next = self.serials.next.load(Ordering::SeqCst);
            self.serials.stall_below.store(next, Ordering::SeqCst);
        }
        self.fault.send_replace(fault);
    }

    /// The fault in force.
    pub fn fault(&self) -> Fault {
        *self.fault.borrow()
    }

    /// Resets every open connection (the client sees a connection reset).
    pub fn reset_connections(&self) {
        self.resets.send_modify(|n| *n += 1);
    }

    /// Connections open through the proxy.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections whose requests were held back by [`Fault::Stall`] and are not through yet:
    /// neither written to the server nor dropped (the server closed the connection first). A
    /// connection the client closed while stalled counts until the server closed its side
    /// too, so after the server ran what it was given.
    pub fn stalled_connections(&self) -> usize {
        self.serials.holding.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.reset_connections();
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
        }
    }
}

#[derive(Clone)]
struct State {
    upstream: SocketAddr,
    fault: Arc<watch::Sender<Fault>>,
    resets: Arc<watch::Sender<u64>>,
    open: Arc<AtomicUsize>,
    serials: Arc<Serials>,
}

impl State {
    /// Whether connection `serial` is stalled now.
    fn stalls(&self, serial: u64) -> bool {
        *self.fault.borrow() == Fault::Stall
            && serial < self.serials.stall_below.load(Ordering::SeqCst)
    }
}

/// Counts a connection in [`Serials::holding`] while it lives.
struct Holding<'a>(Option<&'a AtomicUsize>);

impl Holding<'_> {
    fn release(&mut self) {
        if let Some(count) = self.0.take() {
            count.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

async fn accept_loop(listener: TcpListener, state: State) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if *state.fault.borrow() == Fault::Refuse {
            let _ = client.set_zero_linger();
            drop(client);
            continue;
        }
        let state = state.clone();
        let serial = state.serials.next.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(state.upstream).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            state.open.fetch_add(1, Ordering::Relaxed);
            let mut resets = state.resets.subscribe();
            resets.mark_unchanged();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let requests = pump(
                &mut client_read,
                &mut server_write,
                &state,
                Direction::Requests,
                serial,
            );
            let replies = pump(
                &mut server_read,
                &mut client_write,
                &state,
                Direction::Replies,
                serial,
            );
            tokio::select! {
                () = requests => {}
                () = replies => {}
                _ = resets.changed() => {}
            }
            state.open.fetch_sub(1, Ordering::Relaxed);
            // Dropping the halves closes both sockets; with linger 0 the peer sees a reset.
            if let Ok(client) = client_read.reunite(client_write) {
                let _ = client.set_zero_linger();
            }
            if let Ok(server) = server_read.reunite(server_write) {
                let _ = server.set_zero_linger();
            }
        });
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Requests,
    Replies,
}

async fn pump<R, W>(from: &mut R, to: &mut W, state: &State, direction: Direction, serial: u64)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    // Requests held back by `Fault::Stall`, and the count of this connection among those
    // holding some.
    let mut held: Vec<u8> = Vec::new();
    let mut holding = Holding(None);
    let mut faults = state.fault.subscribe();
    loop {
        if !held.is_empty() && !state.stalls(serial) {
            if to.write_all(&held).await.is_err() {
                return;
            }
            held.clear();
            holding.release();
        }
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            changed = faults.changed(), if !held.is_empty() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        let n = match read {
            Ok(n) if n > 0 => n,
            _ if held.is_empty() => return,
            _ => {
                // The client closed a stalled connection: the server still gets what it sent,
                // then the close; the pair ends when the server closes its side.
                while state.stalls(serial) {
                    if faults.changed().await.is_err() {
                        return;
                    }
                }
                if to.write_all(&held).await.is_err() {
                    return;
                }
                let _ = to.shutdown().await;
                std::future::pending::<()>().await;
                return;
            }
        };
        let fault = *state.fault.borrow();
        match fault {
            Fault::Blackhole => continue,
            Fault::DropReplies if direction == Direction::Replies => continue,
            Fault::Delay(delay) => tokio::time::sleep(delay).await,
            Fault::Stall if state.stalls(serial) => {
                if direction == Direction::Requests {
                    if held.is_empty() && holding.0.is_none() {
                        state.serials.holding.fetch_add(1, Ordering::SeqCst);
                        holding = Holding(Some(&state.serials.holding));
                    }
                    held.extend_from_slice(&buf[..n]);
                }
                continue;
            }
            _ => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod proxy_tests {
    use super::*;
    use crate::RedisServer;
    use std::io::{Read, Write};

    fn ping(port: u16) -> io::Result<String> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_millis(300)))?;
        stream.write_all(b"PING\r\n")?;
        let mut buf = [0u8; 64];
        let n = stream.read(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    #[test]
    fn passes_delays_blackholes_and_refuses() {
        let server = RedisServer::start().unwrap();
        let proxy = FaultProxy::start(server.port()).unwrap();
        assert_eq!(ping(proxy.port()).unwrap(), "+PONG\r\n");
        proxy.set(Fault::Delay(Duration::from_millis(50)));
        let started = std::time::Instant::now();
        assert_eq!(ping(proxy.port()).unwrap(), "+PONG\r\n");
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "both directions delayed"
        );
        proxy.set(Fault::Blackhole);
        assert!(ping(proxy.port()).is_err(), "no reply through a blackhole");
        proxy.set(Fault::Refuse);
        assert!(ping(proxy.port()).is_err(), "refused");
        proxy.set(Fault::Pass);
        assert_eq!(ping(proxy.port()).unwrap(), "+PONG\r\n");
    }

    #[test]
    fn dropped_replies_still_reach_the_server() {
        let server = RedisServer::start().unwrap();
        let proxy = FaultProxy::start(server.port()).unwrap();
        proxy.set(Fault::DropReplies);
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        stream.write_all(b"SET applied yes\r\n").unwrap();
        let mut buf = [0u8; 16];
        assert!(stream.read(&mut buf).is_err(), "the reply was dropped");
        assert_eq!(
            server.cli(&["GET", "applied"]).unwrap(),
            "yes",
            "the command ran"
        );
    }

    #[test]
    fn reset_closes_open_connections() {
        let server = RedisServer::start().unwrap();
        let proxy = FaultProxy::start(server.port()).unwrap();
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        stream.write_all(b"PING\r\n").unwrap();
        let mut buf = [0u8; 16];
        assert!(stream.read(&mut buf).unwrap() > 0);
        proxy.reset_connections();
        let mut closed = false;
        for _ in 0..20 {
            let _ = stream.write_all(b"PING\r\n");
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => {
                    closed = true;
                    break;
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        assert!(closed, "the connection survived the reset");
    }
}
