//! The address-space view an import keeps per process (its mappings and their
//! protections, as the trace's calls change them) and the builder of the
//! runs of accesses it writes.

use super::*;

impl View {
    pub(super) fn get(&self, page: u64) -> Option<Prot> {
        let (_, &(end, prot)) = self.map.range(..=page).next_back()?;
        (page < end).then_some(prot)
    }

    /// Removes `[start, end)` and, with `prot`, maps it again.
    pub(super) fn set(&mut self, start: u64, end: u64, prot: Option<Prot>) {
        let over: Vec<u64> =
            self.map.range(..end).rev().take_while(|(_, (e, _))| *e > start).map(|(s, _)| *s).collect();
        for s in over {
            let (e, p) = self.map.remove(&s).expect("listed");
            if s < start {
                self.map.insert(s, (start, p));
            }
            if e > end {
                self.map.insert(end, (e, p));
            }
        }
        if let Some(p) = prot {
            self.map.insert(start, (end, p));
        }
    }

    /// Returns the mapped pieces of `[start, end)`, with their protection.
    pub(super) fn pieces(&self, start: u64, end: u64) -> Vec<(u64, u64, Prot)> {
        let mut out: Vec<(u64, u64, Prot)> = self
            .map
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .map(|(&s, &(e, p))| (s.max(start), e.min(end), p))
            .collect();
        out.reverse();
        out
    }

    /// Changes the protection of what is mapped in `[start, end)`; the pages
    /// stop being image pages.
    pub(super) fn protect(&mut self, start: u64, end: u64, write: bool) {
        for (s, e, _) in self.pieces(start, end) {
            self.set(s, e, Some(Prot { write, image: false }));
        }
    }

    /// Returns the mapped runs of `[start, end)`, adjacent pieces joined.
    pub(super) fn runs(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (s, e, _) in self.pieces(start, end) {
            match out.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => out.push((s, e)),
            }
        }
        out
    }

    /// The simulator's own image, which an `execve` gives a process.
    pub(super) fn exec_image() -> View {
        let mut v = View::default();
        for (va, pages, write) in
            [(TEXT_VA, TEXT_PAGES, false), (DATA_VA, DATA_PAGES, true), (STACK_VA, STACK_PAGES, true)]
        {
            v.set(va >> 12, (va >> 12) + pages, Some(Prot { write, image: false }));
        }
        v
    }
}

impl Builder {
    pub(super) fn flush_run(&mut self) {
        if let Some(r) = self.run.take() {
            let event = Event::Data { page: r.page, refs: r.refs, write: r.write };
            self.recs.push((r.at, Record { instrs: r.instrs, event }));
        }
    }

    pub(super) fn push(&mut self, at: u64, event: Event) {
        self.flush_run();
        let instrs = std::mem::take(&mut self.instrs);
        self.recs.push((at, Record { instrs, event }));
    }

    pub(super) fn data(&mut self, at: u64, page: u64, write: bool) {
        match &mut self.run {
            Some(r) if r.page == page => {
                r.refs += 1;
                r.write |= write;
            }
            _ => {
                self.flush_run();
                let instrs = std::mem::take(&mut self.instrs);
                self.run = Some(Run { at, instrs, page, refs: 1, write });
            }
        }
    }
}
