//! Debug builds on Linux: the stack address of the frame running the current
//! event ([`crate::sim::Sim`]'s step), so that the machine's `Hw::shared` can refuse an
//! address of this thread's stack below it: a temporary of the policy's. The
//! simulator names a cache line by host address, so a temporary reported as
//! shared would be one line for every simulated CPU (they all run on this
//! stack) and would move with the build's frame layout. (A C policy runs on a
//! stack of its own, `tlbkit_fault::call`'s; its file's data, mapped with the
//! file, is no thread's stack.)

use std::cell::Cell;

thread_local! {
    static TOP: Cell<usize> = const { Cell::new(0) };
    /// The lowest address of this thread's stack (0: not read yet).
    static LOW: Cell<usize> = const { Cell::new(0) };
}

/// Marks `anchor`, a local of the event's frame, as the top of the event's
/// stack until the guard drops.
pub(crate) fn enter(anchor: &u8) -> Guard {
    Guard(TOP.replace(core::ptr::from_ref(anchor) as usize))
}

/// Restores the mark of an enclosing event, if any.
pub(crate) struct Guard(usize);

impl Drop for Guard {
    fn drop(&mut self) {
        TOP.set(self.0);
    }
}

/// Returns the lowest address of this thread's stack, or `usize::MAX` when
/// the system does not say (the check is then off).
fn low() -> usize {
    if LOW.get() == 0 {
        let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
        let (mut base, mut size) = (core::ptr::null_mut(), 0);
        // SAFETY: `attr` is initialised by a successful `pthread_getattr_np`
        // before it is read, and destroyed once; the out-pointers are valid.
        let low = unsafe {
            if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
                usize::MAX
            } else {
                let got = libc::pthread_attr_getstack(attr.as_ptr(), &mut base, &mut size);
                libc::pthread_attr_destroy(attr.as_mut_ptr());
                if got == 0 {
                    base as usize
                } else {
                    usize::MAX
                }
            }
        };
        LOW.set(low);
    }
    LOW.get()
}

/// Panics if `addr` is on this thread's stack below the event's frame.
pub(crate) fn refuse_temporary(addr: usize) {
    let top = TOP.get();
    if top == 0 {
        return;
    }
    assert!(
        !(low()..top).contains(&addr),
        "a policy reported a temporary (stack address {addr:#x}) as a shared variable to Hw::shared; \
         report only variables that outlive the call, as the kernel's shared data does"
    );
}
