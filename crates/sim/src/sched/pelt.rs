//! Per-entity load tracking (PELT, `kernel/sched/pelt.c` and its callers in
//! `kernel/sched/fair.c`): the decaying averages of how much of the recent
//! past a task was runnable and running, and the same of a CPU's fair run
//! queue, which the kernel's wake-up placement reads: the loads in
//! `wake_affine_weight`, the utilisation in SIS_UTIL's bound on the idle
//! scan ([`idle_scan_count`]).
//!
//! The arithmetic is the kernel's, to the unit:
//! - Time is counted in units of 1,024 ns; a period is 1,024 units (about
//!   1 ms). A contribution `p` periods old counts `y^p`, with `y^32 = 1/2`.
//!   `decay_load` multiplies by `y^n` with a table of `y^k` for `k < 32` in
//!   32-bit fixed point (`runnable_avg_yN_inv`, here computed by
//!   [`y_inv_table`] the way the kernel's generator computes it) and a
//!   shift for each 32 periods; past 63 × 32 periods a sum is 0.
//! - `accumulate_sum` splits the time since the last update into the rest
//!   of the period under way (`d1`), the whole periods (`d2`, summed in
//!   closed form from [`LOAD_AVG_MAX`]) and the start of the current one
//!   (`d3`), decays the old sums and adds the new contribution (`load ×
//!   time`, `runnable × time << 10`, `running × time << 10`).
//! - An average is its sum over the divider `LOAD_AVG_MAX - 1024 +
//!   period_contrib` (`get_pelt_divider`), times the weight for an entity's
//!   load.
//! - An entity joins a run queue's averages when it arrives (a new task, a
//!   wake-up on another CPU, a balancer's move: `attach_entity_load_avg`),
//!   leaves them at once when the balancer moves it (`detach`), and is
//!   `removed` when it wakes elsewhere or dies (`remove_entity_load_avg`:
//!   subtracted at the queue's next update). A new task starts at its full
//!   weight as load and a share of the queue's utilisation
//!   (`init_entity_runnable_average`, `post_init_entity_util_avg`).
//!
//! Not modelled: frequency and capacity invariance (every CPU at full
//! capacity, so the PELT clock is the task clock), the lost idle time of a
//! CPU always busy (`update_idle_rq_clock_pelt`), group entities (the tasks
//! are taken as children of the root's run queue: `task_h_load` is a task's
//! own load), `util_est`, and the decay of an idle CPU's blocked load by the
//! NOHZ idle balancer between its own updates.

/// Periods in which a contribution halves (`LOAD_AVG_PERIOD`).
pub const LOAD_AVG_PERIOD: u64 = 32;

/// The sum of a contribution of 1,024 every period since ever, as the
/// kernel's integer recurrence converges (`LOAD_AVG_MAX`, 47,742: see
/// [`converged_max`]).
pub const LOAD_AVG_MAX: u32 = converged_max(&Y_INV);

/// The least divider (`PELT_MIN_DIVIDER`).
pub const MIN_DIVIDER: u32 = LOAD_AVG_MAX - 1024;

/// `SCHED_CAPACITY_SHIFT`: a CPU's full capacity is `1 << 10`.
pub const CAPACITY_SHIFT: u32 = 10;

/// `y^k` for `k < 32` in 32-bit fixed point.
const Y_INV: [u32; 32] = y_inv_table();

/// Returns `(2^32 - 1) × y^k` for `k < 32`, `y = 2^(-1/32)`, truncated as
/// the kernel's generator (`Documentation/scheduler/sched-pelt.c`) truncates
/// its doubles. Here in 64-bit fixed point: `y` is found by bisection as the
/// largest fraction whose 32nd power does not exceed one half.
pub const fn y_inv_table() -> [u32; 32] {
    const ONE: u128 = 1 << 64;
    // y in Q64 (exclusive upper bound 1.0).
    let (mut lo, mut hi) = (ONE / 2, ONE);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let mut p = mid;
        let mut i = 0;
        while i < 5 {
            p = (p * p) >> 64;
            i += 1;
        }
        if p <= ONE / 2 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut out = [0u32; 32];
    let mut pow = ONE;
    let mut k = 0;
    while k < 32 {
        out[k] = ((pow * 0xffff_ffff) >> 64) as u32;
        pow = (pow * lo) >> 64;
        k += 1;
    }
    out
}

/// Returns the limit of the kernel's recurrence `max = max × y + 1024`
/// (`calc_converged_max`: each step `(max × y_inv[1]) >> 32`, in integers).
pub const fn converged_max(y_inv: &[u32; 32]) -> u32 {
    let mut max: u64 = 1024;
    let mut last = 0;
    while last != max {
        last = max;
        max = ((max * y_inv[1] as u64) >> 32) + 1024;
    }
    max as u32
}

/// `decay_load`: `val × y^n`.
pub fn decay_load(val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let (mut val, mut n) = (val, n);
    if n >= LOAD_AVG_PERIOD {
        val >>= n / LOAD_AVG_PERIOD;
        n %= LOAD_AVG_PERIOD;
    }
    ((u128::from(val) * u128::from(Y_INV[n as usize])) >> 32) as u64
}

/// `__accumulate_pelt_segments`: `d1 y^p + 1024 Σ_{n=1}^{p-1} y^n + d3`.
fn accumulate_segments(periods: u64, d1: u32, d3: u32) -> u32 {
    let c1 = decay_load(u64::from(d1), periods) as u32;
    let c2 = LOAD_AVG_MAX - decay_load(u64::from(LOAD_AVG_MAX), periods) as u32 - 1024;
    c1 + c2 + d3
}

/// SIS_UTIL's count (`update_idle_cpu_scan`): of a cache domain of `weight`
/// CPUs whose utilisations sum to `sum_util`, with `imbalance_pct` `pct`,
/// the CPUs a wake-up's idle scan may look at:
/// `(1024 - min(1024, x² pct² / (10000 × 1024))) × weight / 1024`, `x` the
/// utilisation per CPU. None from `x = 1024 × 100 / pct` (85% busy at 117).
pub fn idle_scan_count(sum_util: u64, weight: u64, pct: u64) -> u32 {
    let x = sum_util / weight.max(1);
    let tmp = (x * x * pct * pct / (10_000 << CAPACITY_SHIFT)).min(1 << CAPACITY_SHIFT);
    ((((1 << CAPACITY_SHIFT) - tmp) * weight) >> CAPACITY_SHIFT) as u32
}

/// One average (`struct sched_avg`): a task's or a run queue's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedAvg {
    /// The time it was last brought up to, in ns; 0: a task not attached
    /// to any run queue (new, or moved and not yet arrived).
    pub last_update: u64,
    load_sum: u64,
    runnable_sum: u64,
    util_sum: u64,
    /// Units of the current period already counted.
    period_contrib: u32,
    /// The load average (a task's: its weight times the share of time it was
    /// runnable; a queue's: the sum of its tasks').
    pub load_avg: u64,
    /// The runnable average, in units of 1/1024 of a task.
    pub runnable_avg: u64,
    /// The utilisation: the share of time running, out of 1024.
    pub util_avg: u64,
}

impl SchedAvg {
    /// `init_entity_runnable_average`: a new task of `weight` counts as
    /// runnable since ever (its load its weight), its utilisation set when
    /// it is first queued ([`RqAvg::attach_new`]).
    pub fn new_task(weight: u32) -> Self {
        SchedAvg { load_avg: u64::from(weight), ..SchedAvg::default() }
    }

    /// `get_pelt_divider`.
    fn divider(&self) -> u64 {
        u64::from(MIN_DIVIDER + self.period_contrib)
    }

    /// `accumulate_sum`: adds `delta` units with `load`, `runnable` and
    /// `running` as they were; returns the periods crossed.
    fn accumulate(&mut self, delta: u64, load: u64, runnable: u64, running: bool) -> u64 {
        let mut contrib = delta as u32;
        let delta = delta + u64::from(self.period_contrib);
        let periods = delta / 1024;
        let rest = (delta % 1024) as u32;
        if periods > 0 {
            self.load_sum = decay_load(self.load_sum, periods);
            self.runnable_sum = decay_load(self.runnable_sum, periods);
            self.util_sum = decay_load(self.util_sum, periods);
            if load > 0 {
                contrib = accumulate_segments(periods, 1024 - self.period_contrib, rest);
            }
        }
        self.period_contrib = if periods > 0 { rest } else { delta as u32 };
        let contrib = u64::from(contrib);
        if load > 0 {
            self.load_sum += load * contrib;
        }
        if runnable > 0 {
            self.runnable_sum += (runnable * contrib) << CAPACITY_SHIFT;
        }
        if running {
            self.util_sum += contrib << CAPACITY_SHIFT;
        }
        periods
    }

    /// `___update_load_sum`: brings the sums to `now` (ns) with `load`,
    /// `runnable` and `running` as they were since the last update; returns
    /// whether a period ended (the averages are then out of date).
    fn update_sum(&mut self, now: u64, load: u64, runnable: u64, running: bool) -> bool {
        let Some(delta) = now.checked_sub(self.last_update) else {
            self.last_update = now;
            return false;
        };
        let delta = delta >> 10;
        if delta == 0 {
            return false;
        }
        self.last_update += delta << 10;
        let (runnable, running) = if load == 0 { (0, false) } else { (runnable, running) };
        self.accumulate(delta, load, runnable, running) > 0
    }

    /// `___update_load_avg`: the averages from the sums, the load's times `load`.
    fn update_avg(&mut self, load: u64) {
        let d = self.divider();
        self.load_avg = load * self.load_sum / d;
        self.runnable_avg = self.runnable_sum / d;
        self.util_avg = self.util_sum / d;
    }

    /// Takes `load`, `util` and `runnable` out of these averages, each an
    /// average and a sum: neither below 0 (`sub_positive`), and no sum below
    /// its average times the least divider (the floor that
    /// `update_cfs_rq_load_avg` and `detach_entity_load_avg` keep).
    fn take_out(&mut self, load: (u64, u64), util: (u64, u64), runnable: (u64, u64)) {
        let pairs = [
            (&mut self.load_avg, &mut self.load_sum, load),
            (&mut self.util_avg, &mut self.util_sum, util),
            (&mut self.runnable_avg, &mut self.runnable_sum, runnable),
        ];
        for (avg, sum, (a, s)) in pairs {
            *avg = avg.saturating_sub(a);
            *sum = sum.saturating_sub(s).max(*avg * u64::from(MIN_DIVIDER));
        }
    }

    /// `__update_load_avg_se`: a task of `weight`, as it was (`was`) since
    /// its last update, brought to `now`.
    pub fn update_task(&mut self, now: u64, weight: u32, was: TaskState) {
        if self.update_sum(now, u64::from(was.on_rq), u64::from(was.runnable), was.running) {
            self.update_avg(u64::from(weight));
        }
    }
}

/// What a task was for its averages since their last update (the arguments
/// of `__update_load_avg_se`: `se->on_rq`, `se_runnable(se)`, `cfs_rq->curr
/// == se`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskState {
    /// Queued (`on_rq`), a task asleep with its dequeue delayed included.
    pub on_rq: bool,
    /// Queued and not asleep with its dequeue delayed.
    pub runnable: bool,
    /// Running.
    pub running: bool,
}

impl TaskState {
    /// Neither queued nor running.
    pub const GONE: TaskState = TaskState { on_rq: false, runnable: false, running: false };
    /// Queued, runnable and running.
    pub const RUNNING: TaskState = TaskState { on_rq: true, runnable: true, running: true };
}

/// A task's averages, the CPU whose queue's averages hold them, and its
/// state since their last update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskAvg {
    /// The averages.
    pub avg: SchedAvg,
    /// The CPU whose run queue's averages hold it; `None`: none (a new task,
    /// or one the balancer detached and has not queued yet).
    pub rq: Option<u32>,
    /// Whether it never joined a queue's averages (a new task).
    pub new: bool,
    /// What it was since the last update.
    pub held: TaskState,
}

impl TaskAvg {
    /// A new task of `weight`.
    pub fn new(weight: u32) -> Self {
        TaskAvg { avg: SchedAvg::new_task(weight), rq: None, new: true, held: TaskState::GONE }
    }
}

/// A CPU's fair run queue's averages (`cfs_rq->avg`), the load waiting to be
/// removed from them (`cfs_rq->removed`), and what the queue held since its
/// last update: the weight of its queued tasks (`load.weight`), how many are
/// runnable (`h_nr_runnable`) and whether one runs (`curr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RqAvg {
    /// The averages.
    pub avg: SchedAvg,
    /// Load, utilisation and runnable average of tasks gone (`removed`).
    removed: (u64, u64, u64),
    /// The queue as it was since the last update.
    held: (u64, u64, bool),
}

impl RqAvg {
    /// `update_cfs_rq_load_avg`: takes the removed tasks out and brings the
    /// averages to `now` with the queue as it was, then records it as it is
    /// now (`weight`, `runnable`, `running`).
    pub fn update(&mut self, now: u64, weight: u64, runnable: u64, running: bool) {
        let (load, util, runnable_avg) = std::mem::take(&mut self.removed);
        if (load, util, runnable_avg) != (0, 0, 0) {
            let d = self.avg.divider();
            self.avg.take_out((load, load * d), (util, util * d), (runnable_avg, runnable_avg * d));
        }
        let (w, r, run) = self.held;
        if self.avg.update_sum(now, w, r, run) {
            self.avg.update_avg(1);
        }
        self.held = (weight, runnable, running);
    }

    /// `attach_entity_load_avg`: task average `se` of `weight` joins the
    /// queue, aligned to its clock and period.
    pub fn attach(&mut self, se: &mut SchedAvg, weight: u32) {
        let d = self.avg.divider();
        se.last_update = self.avg.last_update;
        se.period_contrib = self.avg.period_contrib;
        se.util_sum = se.util_avg * d;
        se.runnable_sum = se.runnable_avg * d;
        let load_sum = se.load_avg * d;
        se.load_sum = if u64::from(weight) < load_sum { load_sum / u64::from(weight.max(1)) } else { 1 };
        let a = &mut self.avg;
        a.load_avg += se.load_avg;
        a.load_sum += u64::from(weight) * se.load_sum;
        a.util_avg += se.util_avg;
        a.util_sum += se.util_sum;
        a.runnable_avg += se.runnable_avg;
        a.runnable_sum += se.runnable_sum;
    }

    /// A new task's first arrival (`post_init_entity_util_avg`, then
    /// [`RqAvg::attach`]): its utilisation the queue's in proportion to its
    /// weight against the queue's load, at most half of the capacity the
    /// queue leaves spare; its runnable average the same.
    pub fn attach_new(&mut self, se: &mut SchedAvg, weight: u32) {
        let cap = (1u64 << CAPACITY_SHIFT).saturating_sub(self.avg.util_avg) / 2;
        if cap > 0 {
            se.util_avg = if self.avg.util_avg != 0 {
                (self.avg.util_avg * u64::from(weight) / (self.avg.load_avg + 1)).min(cap)
            } else {
                cap
            };
        }
        se.runnable_avg = se.util_avg;
        self.attach(se, weight);
    }

    /// `detach_entity_load_avg`: task average `se` of `weight` leaves the
    /// queue at once (the balancer's move), `se` kept for its arrival.
    pub fn detach(&mut self, se: &mut SchedAvg, weight: u32) {
        self.avg.take_out(
            (se.load_avg, u64::from(weight) * se.load_sum),
            (se.util_avg, se.util_sum),
            (se.runnable_avg, se.runnable_sum),
        );
        se.last_update = 0;
    }

    /// `remove_entity_load_avg`: task average `se` of `weight`, asleep, is
    /// brought to the queue's last update as blocked (`sync_entity_load_avg`)
    /// and left for the queue's next update to subtract (a wake-up on
    /// another CPU, or death).
    pub fn remove(&mut self, se: &mut SchedAvg, weight: u32) {
        se.update_task(self.avg.last_update, weight, TaskState::GONE);
        self.removed.0 += se.load_avg;
        self.removed.1 += se.util_avg;
        self.removed.2 += se.runnable_avg;
        se.last_update = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1,024 ns units in `ms` milliseconds.
    const MS: u64 = 1_000_000;

    #[test]
    fn the_table_halves_in_32_periods_and_the_series_converges_to_the_kernels_constant() {
        // The kernel's generated header (`kernel/sched/sched-pelt.h`):
        // LOAD_AVG_MAX and `runnable_avg_yN_inv`, which the computation
        // here must give to the unit.
        assert_eq!(LOAD_AVG_MAX, 47742);
        let header: [u32; 32] = [
            0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796, 0xd744fcc9,
            0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46, 0xb504f333, 0xb123f581,
            0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9, 0x9837f050, 0x94f4efa8, 0x91c3d373,
            0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
        ];
        assert_eq!(Y_INV, header);
        // Each entry within one of (2^32 - 1) y^k in doubles.
        for (k, &v) in Y_INV.iter().enumerate() {
            let want = (4_294_967_295.0 * 0.5f64.powf(k as f64 / 32.0)) as i64;
            assert!((i64::from(v) - want).abs() <= 1, "y^{k}: {v:#x} against {want:#x}");
        }
        // Halved by the shift, then times y^0 = (2^32 - 1) / 2^32, as the kernel does.
        assert_eq!(decay_load(1 << 20, 32), (1 << 19) - 1);
        assert_eq!(decay_load(1 << 20, 64 * 32), 0);
    }

    #[test]
    fn a_task_always_running_converges_to_its_weight_and_full_utilisation() {
        let mut a = SchedAvg { last_update: 1, ..SchedAvg::default() };
        let mut now = 1;
        for _ in 0..1000 {
            now += MS;
            a.update_task(now, 1024, TaskState::RUNNING);
        }
        assert!((1000..=1024).contains(&a.load_avg), "{a:?}");
        assert!((1000..=1024).contains(&a.util_avg), "{a:?}");
        // Asleep for 32 ms (about 31 periods of 1,024 us): about half.
        a.update_task(now + 32 * MS, 1024, TaskState::GONE);
        assert!((480..=540).contains(&a.load_avg), "{a:?}");
    }

    #[test]
    fn a_task_running_half_the_time_has_half_its_weight() {
        let mut a = SchedAvg { last_update: 1, ..SchedAvg::default() };
        let mut now = 1;
        for i in 0..4000 {
            now += MS / 2;
            let on = i % 2 == 0;
            a.update_task(now, 1024, if on { TaskState::RUNNING } else { TaskState::GONE });
        }
        assert!((430..=600).contains(&a.load_avg), "{a:?}");
    }

    #[test]
    fn a_queue_carries_a_tasks_load_until_it_is_removed() {
        let mut rq = RqAvg::default();
        rq.update(1, 0, 0, false);
        let mut se = SchedAvg::new_task(1024);
        rq.attach_new(&mut se, 1024);
        assert_eq!((rq.avg.load_avg, se.util_avg), (1024, 512));
        // It runs for 20 ms, then sleeps: the queue's load stays near its weight.
        rq.update(1, 1024, 1, true);
        rq.update(1 + 20 * MS, 0, 0, false);
        let loaded = rq.avg.load_avg;
        assert!(loaded > 900, "{rq:?}");
        // Asleep, it still counts (blocked load), decaying...
        rq.update(1 + 52 * MS, 0, 0, false);
        assert!(rq.avg.load_avg < loaded && rq.avg.load_avg > loaded / 3, "{rq:?}");
        // ...until it wakes elsewhere: removed at the queue's next update.
        se.update_task(1 + 20 * MS, 1024, TaskState::RUNNING);
        rq.remove(&mut se, 1024);
        assert_eq!(se.last_update, 0);
        rq.update(1 + 53 * MS, 0, 0, false);
        assert!(rq.avg.load_avg < 50, "{rq:?}");
    }

    #[test]
    fn the_idle_scan_covers_an_idle_domain_and_stops_at_85_percent() {
        assert_eq!(idle_scan_count(0, 8, 117), 8);
        // Half busy: 1024 - 512² × 117² / 10,240,000 = 1024 - 350 = 674.
        assert_eq!(idle_scan_count(8 * 512, 8, 117), (674 * 8 / 1024) as u32);
        assert_eq!(idle_scan_count(8 * 875, 8, 117), 0);
        assert_eq!(idle_scan_count(8 * 1024, 8, 117), 0);
    }

    #[test]
    fn a_detached_task_leaves_nothing_behind_and_arrives_whole() {
        let (mut a, mut b) = (RqAvg::default(), RqAvg::default());
        a.update(1, 0, 0, false);
        b.update(1, 0, 0, false);
        let mut se = SchedAvg::new_task(1024);
        a.attach(&mut se, 1024);
        a.detach(&mut se, 1024);
        assert_eq!((a.avg.load_avg, a.avg.util_avg), (0, 0));
        b.attach(&mut se, 1024);
        assert_eq!(b.avg.load_avg, 1024);
        assert_eq!(se.last_update, b.avg.last_update);
    }
}
