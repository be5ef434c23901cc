//! Naming a C policy's files: `c:PATH[@REV][+PATH...][+cnp=on]`.

use std::process::Command;
use tlbkit_c::source::Role;
use tlbkit_c::Sources;

#[test]
fn a_file_at_a_revision_is_read_from_its_git_tree() {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-c-sources-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("arch/arm64/mm")).unwrap();
    let git = |args: &[&str]| Command::new("git").arg("-C").arg(&dir).args(args).output();
    if !git(&["init", "-q"]).is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no git on this machine");
        return;
    }
    let file = dir.join("arch/arm64/mm/context.c");
    std::fs::write(&file, "/* as released */\n").unwrap();
    for args in [&["add", "."][..], &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "v1"]] {
        assert!(git(args).unwrap().status.success());
    }
    std::fs::write(&file, "/* patched */\n").unwrap();
    let path = file.display().to_string();
    let at_head = Sources::parse(&format!("c:{path}@HEAD")).unwrap();
    assert_eq!(at_head.files[0].text, b"/* as released */\n");
    assert_eq!(at_head.files[0].name, format!("{path}@HEAD"));
    let now = Sources::parse(&format!("c:{path}")).unwrap();
    assert_eq!(now.files[0].text, b"/* patched */\n");
    let e = Sources::parse(&format!("c:{path}@no-such-rev")).unwrap_err().to_string();
    assert!(e.contains("no-such-rev") && e.contains("git show"), "{e}");
    // A revision with a slash (a remote branch) is a revision, not a path.
    assert!(git(&["branch", "-q", "topic/x"]).unwrap().status.success());
    let branch = Sources::parse(&format!("c:{path}@topic/x")).unwrap();
    assert_eq!(branch.files[0].text, b"/* as released */\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn headers_replace_shims_by_name_and_options_are_no_files() {
    let linux = concat!(env!("CARGO_MANIFEST_DIR"), "/../../third_party/linux/5e10f9887ed8-parent/arch/arm64");
    let s = Sources::parse(&format!("c:{linux}/mm/context.c+{linux}/include/asm/tlbflush.h+cnp=on")).unwrap();
    assert_eq!(
        s.files.iter().map(|f| f.role.clone()).collect::<Vec<_>>(),
        [Role::Code, Role::Header("tlbflush.h".into())]
    );
    assert!(s.cnp && !s.early_bitops);
    let old = Sources::parse(&format!("c:{linux}/mm/context.c+bitops=v4.19")).unwrap();
    assert!(old.early_bitops && old.digest() != Sources::parse(&format!("c:{linux}/mm/context.c")).unwrap().digest());
    for (name, says) in [
        ("c:", "names its files"),
        (&format!("c:{linux}/include/asm/tlbflush.h"), "names no .c file"),
        (&format!("c:{linux}/mm/context.c+{linux}/include/asm/cputype.h"), "no <asm/cputype.h> to replace"),
        (&format!("c:{linux}/mm/context.c+{linux}/include/asm/mmu_context.h"), "no <asm/mmu_context.h> to replace"),
        (&format!("c:{linux}/mm/context.c+cnp=maybe"), "cnp is on or off"),
        (&format!("c:{linux}/mm/context.c+kpti=on"), "options are cnp=on|off and bitops=v4.19|v6.0"),
        (&format!("c:{linux}/mm/context.c+bitops=v5.4"), "bitops is v4.19 (the kernels from v4.19 to v5.19) or v6.0"),
        ("c:/no/such/file.c", "cannot read /no/such/file.c"),
    ] {
        let e = Sources::parse(name).unwrap_err().to_string();
        assert!(e.contains(says), "{name}: {e}");
    }
}

#[test]
fn a_pinned_name_reads_its_files_only_while_their_content_is_the_same() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-c-pinned-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("context.c");
    std::fs::write(&file, "/* one */\n").unwrap();
    let name = format!("c:{}", file.display());
    let pinned = tlbkit_c::source::pin(&name).unwrap();
    let (bare, digest) = pinned.rsplit_once('#').unwrap();
    assert_eq!((bare, digest.len()), (name.as_str(), 16), "{pinned}");
    assert_eq!(tlbkit_c::source::unpinned(&pinned), name);
    assert_eq!(tlbkit_c::source::pin(&pinned).unwrap(), pinned, "pinning twice changes nothing");
    assert_eq!(Sources::parse(&pinned).unwrap().files[0].text, b"/* one */\n");
    // The same bytes under another option, or other bytes: another digest.
    assert_ne!(tlbkit_c::source::pin(&format!("{name}+cnp=on")).unwrap().rsplit_once('#').unwrap().1, digest);
    std::fs::write(&file, "/* two */\n").unwrap();
    let e = Sources::parse(&pinned).unwrap_err();
    assert!(matches!(e, tlbkit_c::Error::Changed { .. }), "{e}");
    let e = e.to_string();
    assert!(e.starts_with(&format!("{name} has changed since this was recorded")) && !e.contains('\n'), "{e}");
    // A '#' not followed by 16 hex digits is part of a path.
    assert_eq!(tlbkit_c::source::unpinned("c:dir#1/context.c"), "c:dir#1/context.c");
    let _ = std::fs::remove_dir_all(&dir);
}
