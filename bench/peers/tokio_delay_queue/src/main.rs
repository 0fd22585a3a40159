// expiry_map_bench's peer: the same five phases on tokio-util's DelayQueue paired with a HashMap
// key index (std's default hasher, as DelayQueue's documentation shows), on a current-thread
// runtime with a paused clock. Usage: tokio_delay_queue N [REPS]. Prints, per rep, one line per
// phase: `phase N ns_per_key`, then `memory N bytes_per_key` (RSS growth over the fill, minus
// the 16 bytes of key and value).
use std::collections::HashMap;
use std::future::poll_fn;
use std::time::{Duration, Instant};
use tokio::time::Instant as TokioInstant;
use tokio_util::time::{delay_queue, DelayQueue};

// The same generator as bench/expiry_map_bench.cpp (splitmix64), so both sides see the same keys
// and TTLs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s.split_whitespace().nth(1).and_then(|x| x.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn print(phase: &str, n: usize, start: Instant) {
    println!("{} {} {:.2}", phase, n, start.elapsed().as_nanos() as f64 / n as f64);
}

async fn one_rep(n: usize, seed: u64) {
    let mut rng = Rng(seed);
    let keys: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let ttl: Vec<u64> = (0..n).map(|_| 10 + rng.below(1000)).collect(); // ms
    let mut entries: HashMap<u64, (u64, delay_queue::Key)> = HashMap::new();
    let mut queue: DelayQueue<u64> = DelayQueue::new();

    let rss0 = rss_bytes();
    let t = Instant::now();
    let base = TokioInstant::now();
    for i in 0..n {
        let k = keys[i];
        let dk = queue.insert_at(k, base + Duration::from_millis(ttl[i]));
        entries.insert(k, (i as u64, dk));
    }
    print("insert", n, t);
    let rss1 = rss_bytes();

    let t = Instant::now();
    let base = TokioInstant::now();
    for &i in &order {
        let (_, dk) = entries.get(&keys[i]).unwrap();
        queue.reset_at(dk, base + Duration::from_millis(2000 + ttl[i]));
    }
    print("move_later", n, t);

    let t = Instant::now();
    let base = TokioInstant::now();
    for &i in &order {
        let (_, dk) = entries.get(&keys[i]).unwrap();
        queue.reset_at(dk, base + Duration::from_millis(ttl[(i + 1) % n]));
    }
    print("move_earlier", n, t);

    let t = Instant::now();
    let mut expired = 0usize;
    while expired < n {
        match poll_fn(|cx| queue.poll_expired(cx)).await {
            Some(e) => {
                entries.remove(e.get_ref());
                expired += 1;
            }
            None => break,
        }
    }
    assert_eq!(expired, n);
    assert!(entries.is_empty());
    print("expire_all", n, t);

    let base = TokioInstant::now();
    for i in 0..n {
        let k = keys[i];
        let dk = queue.insert_at(k, base + Duration::from_millis(ttl[i]));
        entries.insert(k, (i as u64, dk));
    }
    let t = Instant::now();
    for &i in &order {
        let (_, dk) = entries.remove(&keys[i]).unwrap();
        queue.remove(&dk);
    }
    print("erase", n, t);
    println!("memory {} {:.1}", n, (rss1.saturating_sub(rss0)) as f64 / n as f64 - 16.0);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10000);
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    for rep in 0..reps {
        // A fresh runtime per rep (and the memory line measured on a fresh process is the one
        // the compare script uses: the first rep's).
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        rt.block_on(one_rep(n, 47 + rep as u64));
    }
}
