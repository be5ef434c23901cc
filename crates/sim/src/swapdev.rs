//! The swap device that page-out writes to and a swap-in fault reads from.
//!
//! A device has a latency per request, a bandwidth (device time per 4 KB
//! page, one page at a time), and a queue depth (requests in flight). Two kinds
//! stand for what Linux swaps to:
//! - **zram** (`--set swap=zram`, the default): a compressed RAM disk, a
//!   synchronous device (`SWP_SYNCHRONOUS_IO`): the CPU that writes or reads a
//!   page compresses or decompresses it itself, so a page-out costs the caller
//!   the compression and a swap-in the decompression, with no queue. Linux's
//!   default zram compressor is `lzo-rle` (v5.1); its speed is taken from LZO's
//!   row of LZ4's published benchmark (below), in cycles per byte, which the
//!   model treats as the same on every preset's core.
//! - **nvme** (`--set swap=nvme`): a flash SSD behind a queue: a page-out
//!   submits its write and goes on (the folio's writeback completes later);
//!   the submission waits only while `depth` requests are in flight. A swap-in
//!   waits for its read. Figures are estimates for a data-centre NVMe drive
//!   (`docs/costs/kernel.md`).
//!
//! zram stores a page whose 8-byte words all hold one value without
//! compressing it (`page_same_filled`, then `ZRAM_SAME` with the value in the
//! slot's handle; `zram_fill_page` writes it back on a read): a workload whose
//! pages are filled so (a `memset`) says so ([`Fill::Same`]); every other page
//! is taken to hold data of ordinary compressibility ([`Fill::Data`]).
//!
//! Not modelled: the swap cache and slot allocation, readahead of neighbouring
//! slots, `lzo-rle`'s faster run-length path for pages mostly of zeros, and the
//! block layer's merging.

use std::collections::VecDeque;

/// What the pages written to swap hold, as zram sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fill {
    /// Data of ordinary compressibility: zram compresses it.
    #[default]
    Data,
    /// One 8-byte value repeated (a page `memset` to a byte, or zeroed): zram
    /// finds it so and stores the value alone (`ZRAM_SAME`).
    Same,
}

/// The kinds of swap device, by the name `--set swap=` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SwapKind {
    /// A zram device compressing with `lzo-rle`.
    #[default]
    Zram,
    /// An NVMe flash SSD.
    Nvme,
}

impl SwapKind {
    /// Every kind, in the order `--set swap` lists them.
    pub const ALL: [SwapKind; 2] = [SwapKind::Zram, SwapKind::Nvme];

    /// Returns the name `--set swap=` selects it by.
    pub const fn name(self) -> &'static str {
        match self {
            SwapKind::Zram => "zram",
            SwapKind::Nvme => "nvme",
        }
    }
}

/// `lzo-rle` compression, cycles per byte: LZ4's README benchmark table
/// (Core i7-9700K at 4.9 GHz, Silesia corpus) gives LZO 2.09 670 MB/s, so
/// 4.9e9 / 670e6 = 7.3 cycles a byte.
const LZO_COMPRESS_CYCLES_PER_KB: u64 = 7_300;
/// `lzo-rle` decompression: the same table's 860 MB/s, 5.7 cycles a byte.
const LZO_DECOMPRESS_CYCLES_PER_KB: u64 = 5_700;
/// A same-filled page's check on a write (`page_same_filled`: the first and
/// last of its 512 8-byte words compared, then every other one) or its fill on
/// a read (`zram_fill_page`: `memset_l` of 512 words), cycles a page: EST, one
/// word a cycle.
const ZRAM_SAME_CYCLES_PER_PAGE: u64 = 512;
/// An NVMe drive's write latency for 4 KB, in ns: EST (data-centre drives
/// quote 10–30 us for writes absorbed by their cache).
const NVME_WRITE_NS: u64 = 20_000;
/// An NVMe drive's 4 KB random-read latency, in ns: EST (data-centre drives
/// quote 70–100 us).
const NVME_READ_NS: u64 = 80_000;
/// An NVMe drive's sequential write bandwidth, MB/s: EST (2 GB/s, a PCIe 3 x4
/// drive's order).
const NVME_MB_PER_S: u64 = 2_000;
/// Requests in flight: EST, the kernel's default `nr_requests` of a blk-mq
/// queue with a scheduler is 2 x the queue depth; 64 stands for what one
/// submitting process keeps outstanding.
const NVME_DEPTH: usize = 64;

/// A swap device's state.
#[derive(Clone, Debug)]
pub struct SwapDevice {
    kind: SwapKind,
    /// Cycles of the device's own time per page (its bandwidth).
    page_cycles: u64,
    write_latency: u64,
    read_latency: u64,
    /// When the device's transfer channel is next free.
    free_at: u64,
    /// Completion times of requests in flight, oldest first.
    inflight: VecDeque<u64>,
}

impl SwapDevice {
    /// Returns a device of `kind` on a machine clocked at `freq_ghz`.
    pub fn new(kind: SwapKind, freq_ghz: f64) -> Self {
        let cycles = |ns: u64| (ns as f64 * freq_ghz) as u64;
        let page_cycles = cycles(4096 * 1000 / NVME_MB_PER_S);
        SwapDevice {
            kind,
            page_cycles,
            write_latency: cycles(NVME_WRITE_NS),
            read_latency: cycles(NVME_READ_NS),
            free_at: 0,
            inflight: VecDeque::new(),
        }
    }

    /// Returns the device's kind.
    pub fn kind(&self) -> SwapKind {
        self.kind
    }

    /// Writes `pages` pages holding `fill` from `t`; returns when the
    /// submitting CPU goes on.
    pub fn write(&mut self, t: u64, pages: u64, fill: Fill) -> u64 {
        match (self.kind, fill) {
            (SwapKind::Zram, Fill::Data) => t + pages * 4 * LZO_COMPRESS_CYCLES_PER_KB,
            (SwapKind::Zram, Fill::Same) => t + pages * ZRAM_SAME_CYCLES_PER_PAGE,
            (SwapKind::Nvme, _) => self.submit(t, pages, self.write_latency).0,
        }
    }

    /// Reads `pages` pages holding `fill` from `t`; returns when they are in
    /// memory.
    pub fn read(&mut self, t: u64, pages: u64, fill: Fill) -> u64 {
        match (self.kind, fill) {
            (SwapKind::Zram, Fill::Data) => t + pages * 4 * LZO_DECOMPRESS_CYCLES_PER_KB,
            (SwapKind::Zram, Fill::Same) => t + pages * ZRAM_SAME_CYCLES_PER_PAGE,
            (SwapKind::Nvme, _) => self.submit(t, pages, self.read_latency).1,
        }
    }

    /// Queues a request of `pages` pages at `t`: it waits for a free slot,
    /// then for the channel. Returns when it was submitted and when it completes.
    fn submit(&mut self, t: u64, pages: u64, latency: u64) -> (u64, u64) {
        self.inflight.retain(|&done| done > t);
        let start = if self.inflight.len() >= NVME_DEPTH { self.inflight.pop_front().unwrap_or(t) } else { t };
        let transfer = start.max(self.free_at) + pages * self.page_cycles;
        self.free_at = transfer;
        let done = transfer + latency;
        let at = self.inflight.partition_point(|&d| d <= done);
        self.inflight.insert(at, done);
        (start, done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zram_costs_the_cpu_its_compression_and_has_no_queue() {
        let mut d = SwapDevice::new(SwapKind::Zram, 3.0);
        assert_eq!(d.write(1000, 1, Fill::Data), 1000 + 4 * LZO_COMPRESS_CYCLES_PER_KB);
        // A second write at the same time is not held back by the first.
        assert_eq!(d.write(1000, 1, Fill::Data), 1000 + 4 * LZO_COMPRESS_CYCLES_PER_KB);
        assert_eq!(d.read(0, 16, Fill::Data), 16 * 4 * LZO_DECOMPRESS_CYCLES_PER_KB);
    }

    #[test]
    fn zram_stores_and_fills_a_same_filled_page_without_compressing_it() {
        let mut d = SwapDevice::new(SwapKind::Zram, 3.0);
        assert_eq!(d.write(1000, 2, Fill::Same), 1000 + 2 * ZRAM_SAME_CYCLES_PER_PAGE);
        assert_eq!(d.read(0, 16, Fill::Same), 16 * ZRAM_SAME_CYCLES_PER_PAGE);
        // Far below compressing the page.
        assert!(d.write(0, 1, Fill::Same) * 10 < d.write(0, 1, Fill::Data));
        // A block device writes the page whatever it holds.
        let mut n = SwapDevice::new(SwapKind::Nvme, 1.0);
        let mut m = SwapDevice::new(SwapKind::Nvme, 1.0);
        assert_eq!(n.write(0, 3, Fill::Same), m.write(0, 3, Fill::Data));
    }

    #[test]
    fn an_nvme_write_returns_at_submission_and_a_read_waits_for_the_device() {
        let mut d = SwapDevice::new(SwapKind::Nvme, 1.0);
        assert_eq!(d.write(0, 1, Fill::Data), 0);
        let read = d.read(0, 1, Fill::Data);
        // Behind the write on the channel, then the read latency.
        assert_eq!(read, 2 * d.page_cycles + NVME_READ_NS);
    }

    #[test]
    fn nvme_submissions_wait_once_the_queue_is_full() {
        let mut d = SwapDevice::new(SwapKind::Nvme, 1.0);
        let submitted: Vec<u64> = (0..NVME_DEPTH + 1).map(|_| d.write(0, 1, Fill::Data)).collect();
        assert!(submitted[..NVME_DEPTH].iter().all(|&s| s == 0));
        // The next waits for the first to complete: its transfer and latency.
        assert_eq!(submitted[NVME_DEPTH], d.page_cycles + NVME_WRITE_NS);
    }
}
