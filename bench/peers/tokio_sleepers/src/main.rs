// tokio_sleepers: sleepers_compare.sh's tokio peer, runtime_bench's `sleepers_expire/wheel/N`
// row written the way a tokio program writes it. One current_thread runtime (one thread, like
// cogwheel's one-core run) on a paused clock (start_paused: when only timers can make progress
// the clock jumps to the next deadline, as runtime_options::paused_clock does), N tasks from
// tokio::spawn, each doing
//     sleep_until(t0 + uniform 1..1000 ms); woke += 1; sleep(24 h)
// so the timed window holds expiry and resumption and re-arming, not the tasks' deallocation.
// Every task has been polled once (its first sleep registered) before the window opens, as
// runtime_bench's sleep_for(0) with a raised ready_budget guarantees; the window then runs
//     while woke < N { sleep(1 ms) }
// as runtime_bench does. Timed: the thread's CPU time (CLOCK_THREAD_CPUTIME_ID; the runtime
// runs on the calling thread) and the wall time.
//
// Usage: tokio_sleepers [--n=1000000] [--iterations=3]
// Prints one line per iteration and then, in runtime_bench's counter names, the means over the
// iterations (runtime_bench's row also averages its 3 iterations):
//     tokio_sleepers n=N iterations=I cpu_ns_per_sleeper=C ns_per_sleeper=W
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static STARTED: AtomicUsize = AtomicUsize::new(0);
static WOKE: AtomicUsize = AtomicUsize::new(0);

fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec for the call to fill in.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

// splitmix64: deadlines uniform over 1..=1000 ms (runtime_bench draws them from mt19937_64; the
// distribution is the same, the sequence need not be).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn ms(&mut self) -> u64 {
        1 + self.next() % 1000
    }
}

async fn sleeper(at: tokio::time::Instant) {
    STARTED.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep_until(at).await;
    WOKE.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
}

// One iteration: (CPU seconds, wall seconds) of the expiry window.
fn iteration(n: usize, rng: &mut Rng) -> (f64, f64) {
    STARTED.store(0, Ordering::Relaxed);
    WOKE.store(0, Ordering::Relaxed);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("tokio runtime");
    let result = rt.block_on(async {
        let t0 = tokio::time::Instant::now();
        for _ in 0..n {
            tokio::spawn(sleeper(t0 + Duration::from_millis(rng.ms())));
        }
        // Every sleeper has been polled once and sleeps (the scheduler runs the spawned tasks
        // between this task's polls).
        while STARTED.load(Ordering::Relaxed) < n {
            tokio::task::yield_now().await;
        }
        let w0 = std::time::Instant::now();
        let c0 = thread_cpu_seconds();
        while WOKE.load(Ordering::Relaxed) < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (thread_cpu_seconds() - c0, w0.elapsed().as_secs_f64())
    });
    drop(rt); // the 1M re-armed sleepers are freed here, outside the window
    result
}

fn main() {
    let mut n: usize = 1_000_000;
    let mut iterations: usize = 3;
    for arg in std::env::args().skip(1) {
        let parsed = if let Some(v) = arg.strip_prefix("--n=") {
            v.parse().map(|v| n = v).is_ok()
        } else if let Some(v) = arg.strip_prefix("--iterations=") {
            v.parse().map(|v| iterations = v).is_ok()
        } else {
            false
        };
        if !parsed {
            eprintln!("tokio_sleepers: bad argument {arg} (usage: tokio_sleepers [--n=1000000] [--iterations=3])");
            std::process::exit(2);
        }
    }
    if n == 0 || iterations == 0 {
        eprintln!("tokio_sleepers: --n and --iterations must be at least 1");
        std::process::exit(2);
    }
    let mut rng = Rng(7);
    let (mut cpu, mut wall) = (0.0, 0.0);
    for i in 0..iterations {
        let (c, w) = iteration(n, &mut rng);
        println!("iteration {i}: cpu_ns_per_sleeper={:.1} ns_per_sleeper={:.1}", c * 1e9 / n as f64, w * 1e9 / n as f64);
        cpu += c;
        wall += w;
    }
    let per = 1e9 / (n * iterations) as f64;
    println!("tokio_sleepers n={n} iterations={iterations} cpu_ns_per_sleeper={:.1} ns_per_sleeper={:.1}", cpu * per, wall * per);
}
