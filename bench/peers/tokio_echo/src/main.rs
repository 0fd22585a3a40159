// tokio_echo: echo_compare.sh's tokio peer, the same server as `examples/echo_server --cores=1
// --mode=timeout` written the way a tokio program writes it: a current_thread runtime (one
// thread, like echo_server on one core; echo_compare.sh pins it to CPU 0 with taskset), a task per
// connection from tokio::spawn, and every read raced against its timeout with
// tokio::time::timeout. tokio's I/O driver is mio on edge-triggered epoll, its timers a
// hierarchical timing wheel: the "tokio with time::timeout" reference.
//
// Usage: tokio_echo [--port=7000] [--bind=127.0.0.1] [--read-timeout-ms=30000]
//   a connection whose read sees nothing for --read-timeout-ms is closed ("kicked").
// Stop it with Ctrl-C (SIGINT) or SIGTERM; it then prints, in echo_server's format,
//   served C connections, M messages; K kicked for idleness; CPU S s (U us per message)
// where CPU is the process's CPU time (user + system) since it started.
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};

static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
static MESSAGES: AtomicU64 = AtomicU64::new(0);
static KICKED: AtomicU64 = AtomicU64::new(0);

// A session's message count, added to the total once when the session ends or is dropped at
// shutdown (no shared counter touched per message, as echo_server does).
struct Served(u64);

impl Drop for Served {
    fn drop(&mut self) {
        MESSAGES.fetch_add(self.0, Ordering::Relaxed);
    }
}

async fn session(mut conn: TcpStream, read_timeout: Duration) {
    let _ = conn.set_nodelay(true);
    CONNECTIONS.fetch_add(1, Ordering::Relaxed);
    let mut served = Served(0);
    let mut buf = [0u8; 4096];
    loop {
        let n = match tokio::time::timeout(read_timeout, conn.read(&mut buf)).await {
            Err(_elapsed) => {
                KICKED.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => n,
        };
        served.0 += 1;
        if conn.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

async fn accept_loop(listener: TcpListener, read_timeout: Duration) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                tokio::spawn(session(conn, read_timeout));
            }
            Err(e) => {
                // Out of descriptors (EMFILE) and the like: back off rather than spin.
                eprintln!("accept: {e} (backing off 10 ms)");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

// --name=value; fallback when absent. Any other argument is a usage error.
fn flag(args: &[String], name: &str, fallback: &str) -> String {
    let key = format!("--{name}=");
    args.iter()
        .find_map(|a| a.strip_prefix(&key).map(str::to_owned))
        .unwrap_or_else(|| fallback.to_owned())
}

fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

// Raises the soft descriptor limit to the hard one: a thousand connections need a thousand.
fn raise_fd_limit() {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write only the rlimit they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    const KNOWN: [&str; 3] = ["--port=", "--bind=", "--read-timeout-ms="];
    if args.iter().any(|a| !KNOWN.iter().any(|k| a.starts_with(k))) {
        eprintln!("usage: tokio_echo [--port=7000] [--bind=127.0.0.1] [--read-timeout-ms=30000]");
        std::process::exit(2);
    }
    let (Ok(port), Ok(bind), Ok(timeout_ms)) = (
        flag(&args, "port", "7000").parse::<u16>(),
        flag(&args, "bind", "127.0.0.1").parse::<Ipv4Addr>(),
        flag(&args, "read-timeout-ms", "30000").parse::<u64>(),
    ) else {
        eprintln!("tokio_echo: --port, --bind or --read-timeout-ms is not a number/IPv4 address");
        std::process::exit(2);
    };
    raise_fd_limit();
    let listener = match TcpListener::bind(SocketAddr::from((bind, port))).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("listen on {bind}:{port}: {e}");
            std::process::exit(1);
        }
    };
    let mut interrupt = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let mut terminate = signal(SignalKind::terminate()).expect("SIGTERM handler");
    println!(
        "tokio_echo: {bind}:{port}, current_thread runtime, time::timeout({timeout_ms} ms) on every read; Ctrl-C stops"
    );
    tokio::select! {
        _ = accept_loop(listener, Duration::from_millis(timeout_ms)) => {}
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    let cpu = process_cpu_seconds();
    let messages = MESSAGES.load(Ordering::Relaxed);
    // Sessions still open are dropped with the runtime; count theirs first.
    println!(
        "served {} connections, {} messages; {} kicked for idleness; CPU {:.3} s ({:.2} us per message)",
        CONNECTIONS.load(Ordering::Relaxed),
        messages,
        KICKED.load(Ordering::Relaxed),
        cpu,
        if messages > 0 { cpu * 1e6 / messages as f64 } else { 0.0 }
    );
}
