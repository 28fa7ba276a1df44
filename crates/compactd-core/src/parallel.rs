//! Work over large inputs split across threads (a session of megabytes parsed, serialized or
//! escaped in two or four parts at once): scoped threads of the standard library, started only
//! where the input is large enough to repay them.

/// Inputs at least this large are worth splitting across threads: below it, starting a thread
/// costs more than it saves.
pub const SPLIT_MIN_BYTES: usize = 1 << 20;

/// How many threads one job over `bytes` of input should use: one for small inputs, else one per
/// core (at most `most`).
pub fn threads_for(bytes: usize, most: usize) -> usize {
    if bytes < SPLIT_MIN_BYTES {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(most))
}

/// Where to split items of these sizes into two halves of about equal size: just after the item
/// that reaches half of their sum (a few large items can hold most of it).
pub fn half_way(sizes: impl IntoIterator<Item = usize> + Clone) -> usize {
    let total: usize = sizes.clone().into_iter().sum();
    let mut seen = 0;
    let mut count = 0;
    for size in sizes {
        seen += size;
        count += 1;
        if seen >= total / 2 {
            return count;
        }
    }
    count
}

/// `work` over `items` split at `middle`, both parts at once (the second on a thread of its own),
/// the results in order.
pub fn in_two<T: Sync, R: Send>(
    items: &[T],
    middle: usize,
    work: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let (first, second) = items.split_at(middle);
    std::thread::scope(|scope| {
        let second = scope.spawn(|| work(second));
        let mut results = work(first);
        results.extend(second.join().expect("the work does not panic"));
        results
    })
}
