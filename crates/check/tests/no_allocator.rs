//! A binary without the checker's allocator: a check there is refused with
//! the line that installs it (the checker's other test binaries, and every
//! front end, install it).

/// This test binary installs no global allocator of the checker's, so it is
/// where a check refused for want of one is seen.
#[test]
fn a_check_in_a_binary_without_the_checkers_allocator_is_refused() {
    let spec = tlbkit_check::CheckSpec {
        policy: "arm64-linux".into(),
        cpus: 2,
        mms: 2,
        pages: 1,
        asids: 4,
        ops: 2,
        mode: tlbkit_check::Mode::Exhaustive,
        iterations: u64::MAX,
        seed: 1,
        memory: tlbkit_check::shape::Memory::Sc,
        menu: tlbkit_check::ops::OpKind::parse("switch,munmap").unwrap(),
        teardown: None,
        completion: Default::default(),
    };
    let e = tlbkit_check::check(&spec).unwrap_err();
    assert!(matches!(e, tlbkit_check::Error::NoCheckAlloc), "{e}");
    assert!(e.to_string().contains("#[global_allocator] static ALLOC: tlbkit_check::arena::CheckAlloc"), "{e}");
}
