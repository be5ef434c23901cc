//! Independent runs spread over the host's cores.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Returns `f` of every item, in the items' order, the items taken one at a
/// time by as many threads as the host has cores (and no more than items).
pub fn on_host_cores<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                out.lock().expect("no item panicked holding the results")[i] = Some(r);
            });
        }
    });
    out.into_inner().expect("no item panicked").into_iter().map(|r| r.expect("every item ran")).collect()
}
