//! A counterexample's summary: what translation was used (`used:`), by which
//! CPU (`by:`), and why it was stale (`why:`: the change and flush it missed,
//! the rollovers on the way), from the execution's events.

use super::*;

/// Returns the three summary lines of violation `v`.
pub(super) fn summary(v: &Violation, events: &[Event]) -> Vec<String> {
    let nums = step_numbers(events);
    let c = v.cpu;
    let root = root_before(events, &nums, c, events.len());
    let by = match &root {
        Some((n, r)) => format!("by:    cpu{c}, running {r} (root written at step {n})"),
        None => format!("by:    cpu{c}, on the root it booted with"),
    };
    let rollovers = rollovers(events, &nums);
    if let Some(walk) = walk_of(&v.detail) {
        let why = walk_why(v, events, &nums, walk, &rollovers);
        return vec![format!("used:  {walk}, cached by cpu{c}"), by, why];
    }
    let Some(entry) = entry_of(&v.detail) else {
        // Not about a cached translation: what happened, where, and the property.
        let last = events.iter().enumerate().rfind(|(_, e)| e.cpu == Some(c) && e.kind == Kind::Op);
        let used = match last {
            Some((i, e)) => format!("used:  cpu{c} in {} (step {})", e.text.trim_start_matches("op: "), nums[i]),
            None => format!("used:  cpu{c}"),
        };
        return vec![used, by, format!("why:   {}: {}{rollovers}", v.property, v.detail)];
    };
    let on_c = format!("on cpu{c}:");
    let fill = events
        .iter()
        .enumerate()
        .rfind(|(_, e)| matches!(&e.kind, Kind::Fill(d) if d == entry) && e.text.contains(&on_c))
        .map(|(i, _)| i);
    let used = match fill.map(|i| (i, root_before(events, &nums, c, i))) {
        Some((i, Some((n, r)))) => {
            format!("used:  {entry}, cached by cpu{c} at step {} under root {r} (written at step {n})", nums[i])
        }
        Some((i, None)) => format!("used:  {entry}, cached by cpu{c} at step {}", nums[i]),
        None => format!("used:  {entry}"),
    };
    let invals = missed_invalidations(events, &nums, c, fill.unwrap_or(0));
    let why = match v.property {
        "no_asid_alias" => {
            let asid = root
                .as_ref()
                .and_then(|(_, r)| r.split("asid ").nth(1))
                .map(|a| a.split(',').next().unwrap_or(a).to_string());
            let asid = asid.map_or("its ASID".to_string(), |a| format!("asid {a}"));
            let to = root.as_ref().map_or("this address space".to_string(), |(n, r)| {
                format!("{} at step {n}", r.split(',').next().unwrap_or(r))
            });
            format!(
                "why:   {asid} was handed to {to} while cpu{c} still held another address space's translation \
                 under it: {invals}{rollovers}"
            )
        }
        _ => removal_why(events, &nums, entry, root.as_ref(), &invals, &rollovers),
    };
    vec![used, by, why]
}

/// CPU `c`'s translation root before event `end`, from the last root write
/// it made: (its step, the root).
fn root_before(events: &[Event], nums: &[usize], c: usize, end: usize) -> Option<(usize, String)> {
    events[..end].iter().enumerate().rfind(|(_, e)| e.cpu == Some(c) && e.kind == Kind::Root).map(|(i, e)| {
        let r = e.text.trim_start_matches("write root: ");
        (nums[i], r.split(", flushing").next().unwrap_or(r).to_string())
    })
}

/// The ASID rollovers of the execution as the end of a "why" line (empty
/// when there were none).
fn rollovers(events: &[Event], nums: &[usize]) -> String {
    let rollovers: Vec<String> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == Kind::Note)
        .map(|(i, e)| format!("{} (cpu{})", nums[i], e.cpu.unwrap_or(0)))
        .collect();
    // Two rollovers in one step of one CPU read as one entry, counted.
    let mut grouped: Vec<(String, usize)> = Vec::new();
    for r in &rollovers {
        match grouped.last_mut() {
            Some((g, k)) if g == r => *k += 1,
            _ => grouped.push((r.clone(), 1)),
        }
    }
    let grouped: Vec<String> = grouped
        .into_iter()
        .map(|(g, k)| if k == 1 { g } else { format!("{}, {k} times)", g.trim_end_matches(')')) })
        .collect();
    if rollovers.is_empty() {
        String::new()
    } else {
        format!(
            "; ASID rollover{} at step{} {}",
            if rollovers.len() == 1 { "" } else { "s" },
            if grouped.len() == 1 { "" } else { "s" },
            step_list(&grouped)
        )
    }
}

/// The "why" line of a cached walk through a freed page-table page: the
/// unhooking it outlived, and the invalidations that reached the CPU after.
fn walk_why(v: &Violation, events: &[Event], nums: &[usize], walk: &str, rollovers: &str) -> String {
    let c = v.cpu;
    let frame = walk.split(" of ").next().and_then(|w| w.rsplit_once('(')).map_or("", |(_, f)| f);
    let unhooked = events
        .iter()
        .enumerate()
        .rfind(|(_, e)| e.kind == Kind::PageTable && !frame.is_empty() && e.text.contains(&format!("({frame}")));
    let Some((at, by_cpu)) = unhooked else {
        return format!("why:   {}: {}{rollovers}", v.property, v.detail);
    };
    let invals: Vec<String> = events[at..]
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == Kind::Invalidate && (e.cpu == Some(c) || e.text.contains("(broadcast)")))
        .map(|(i, _)| nums[at + i].to_string())
        .collect();
    let flush = flush_after(events, nums, at, by_cpu.cpu).unwrap_or_default();
    let reached = if invals.is_empty() {
        format!("no invalidation reached cpu{c} after it")
    } else {
        format!("the invalidations that reached cpu{c} after it (steps {}) kept the walk", step_list(&invals))
    };
    format!("why:   {} at step {}{flush}: {reached}{rollovers}", by_cpu.text, nums[at])
}

/// The first flush that completed on `cpu` from event `at` on, as the end of
/// a sentence: ", <flush> at step N".
fn flush_after(events: &[Event], nums: &[usize], at: usize, cpu: Option<usize>) -> Option<String> {
    events[at..]
        .iter()
        .enumerate()
        .find(|(_, e)| e.kind == Kind::FlushDone && e.cpu == cpu)
        .map(|(i, e)| format!(", {} at step {}", e.text.split(':').next().unwrap_or(""), nums[at + i]))
}

/// What became of the invalidations after CPU `c` cached the entry at event
/// `from`: those that reached it (all missed it), and those issued for it
/// that were still waiting for their CPU's barrier.
fn missed_invalidations(events: &[Event], nums: &[usize], c: usize, from: usize) -> String {
    let covering = |e: &Event| e.kind == Kind::Invalidate && (e.cpu == Some(c) || e.text.contains("(broadcast)"));
    let steps_of = |waiting: bool| -> Vec<String> {
        events[from..]
            .iter()
            .enumerate()
            .filter(|(_, e)| covering(e) && e.text.contains(ISSUED) == waiting)
            .map(|(i, _)| nums[from + i].to_string())
            .collect()
    };
    let (invals, waiting) = (steps_of(false), steps_of(true));
    let waiting = if waiting.is_empty() {
        String::new()
    } else {
        let mut d = waiting;
        d.dedup();
        format!(
            " (the invalidation{} issued at step{} {} complete{} only at its CPU's next DSB or TLBSYNC)",
            if d.len() == 1 { "" } else { "s" },
            if d.len() == 1 { "" } else { "s" },
            step_list(&d),
            if d.len() == 1 { "s" } else { "" }
        )
    };
    if invals.is_empty() {
        format!("no invalidation reached cpu{c} after it cached the entry{waiting}")
    } else {
        let mut d = invals.clone();
        d.dedup();
        format!(
            "the invalidations that reached cpu{c} after it cached the entry (step{} {}) did not cover it{waiting}",
            if d.len() == 1 { "" } else { "s" },
            step_list(&d)
        )
    }
}

/// The "why" line of a stale entry: the removal whose flush should have
/// taken it away (the last change of its page in the address space the CPU
/// runs) and the flush that followed it on the CPU that made it.
fn removal_why(
    events: &[Event],
    nums: &[usize],
    entry: &str,
    root: Option<&(usize, String)>,
    invals: &str,
    rollovers: &str,
) -> String {
    let va = entry.split_whitespace().find(|w| w.starts_with("0x")).unwrap_or("");
    let mm = root.map(|(_, r)| format!(" in {}", r.split(',').next().unwrap_or(r)));
    let changed = events.iter().enumerate().rev().find(|(_, e)| {
        e.kind == Kind::PageTable
            && !e.drain
            && !e.text.starts_with(DRAINS)
            && !va.is_empty()
            && e.text.contains(va)
            && mm.as_ref().is_none_or(|m| e.text.contains(m.as_str()))
    });
    let change = changed.map(|(i, e)| format!("{} at step {}", e.text, nums[i]));
    let flush = changed.and_then(|(at, by)| flush_after(events, nums, at, by.cpu));
    format!(
        "why:   {}{}: {invals}{rollovers}",
        change.unwrap_or_else(|| "its translation was removed".to_string()),
        flush.unwrap_or_default()
    )
}
