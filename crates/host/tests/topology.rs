//! The `/sys` parser on fixture trees of three machines unlike each other,
//! its errors, and on the host it runs on.

use std::fs;
use std::path::{Path, PathBuf};
use tlbkit_host::topology::{read, Uname};
use tlbkit_host::Error;

/// A `/sys`-like tree in a temporary directory, removed when dropped.
struct Tree(PathBuf);

impl Tree {
    /// Creates an empty tree named after the test.
    fn new(name: &str) -> Tree {
        let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("tlbkit-host-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        Tree(root)
    }

    /// Writes `text` (and a newline, as the kernel does) to `path` in the tree.
    fn file(&self, path: &str, text: &str) -> &Tree {
        let path = self.0.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("{text}\n")).unwrap();
        self
    }

    /// Writes a cache `indexN` of `cpu`.
    fn cache(&self, cpu: usize, index: usize, level: u32, kind: &str, shared: &str) -> &Tree {
        let dir = format!("devices/system/cpu/cpu{cpu}/cache/index{index}");
        self.file(&format!("{dir}/level"), &level.to_string())
            .file(&format!("{dir}/type"), kind)
            .file(&format!("{dir}/shared_cpu_list"), shared)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn uname(machine: &str) -> Uname {
    Uname { machine: machine.into(), release: "6.8.0".into(), nodename: "fixture".into() }
}

const X86_CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\ncpu MHz\t\t: 2899.998\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\ncpu MHz\t\t: 1200.000\n";

#[test]
fn two_cpu_vm_without_cpufreq_or_caches() {
    let tree = Tree::new("vm");
    tree.file("devices/system/cpu/online", "0-1");
    for cpu in 0..2 {
        let dir = format!("devices/system/cpu/cpu{cpu}/topology");
        tree.file(&format!("{dir}/physical_package_id"), "0")
            .file(&format!("{dir}/core_cpus_list"), &cpu.to_string())
            .file(&format!("{dir}/thread_siblings_list"), &cpu.to_string());
    }
    let t = read(tree.path(), X86_CPUINFO, uname("x86_64")).unwrap();
    assert_eq!(t.online, [0, 1]);
    assert_eq!((t.packages, t.cpus_per_package, t.cpus_per_l3), (1, 2, 2));
    assert_eq!((t.threads_per_core, t.numa_nodes), (1, 1));
    assert_eq!(t.model, "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz");
    // cpu0's `cpu MHz`, not cpu1's.
    assert_eq!(t.max_mhz, Some(2899.998));
    assert_eq!((t.arch.as_str(), t.kernel.as_str(), t.hostname.as_str()), ("x86_64", "6.8.0", "fixture"));
}

/// Two sockets of 8 cores and 16 threads, an L3 per 4 cores (AMD CCX-like),
/// numbered as Linux numbers them: the first thread of every core, then the
/// second threads (0-7 and 16-23 on socket 0).
#[test]
fn two_socket_smt_box_with_two_l3_per_socket() {
    let tree = Tree::new("epyc");
    tree.file("devices/system/cpu/online", "0-31");
    for cpu in 0..32 {
        let (core, package) = (cpu % 16, (cpu % 16) / 8);
        let dir = format!("devices/system/cpu/cpu{cpu}/topology");
        let siblings = format!("{core},{}", core + 16);
        tree.file(&format!("{dir}/physical_package_id"), &package.to_string())
            .file(&format!("{dir}/core_cpus_list"), &siblings)
            .file(&format!("{dir}/thread_siblings_list"), &siblings);
    }
    tree.cache(0, 0, 1, "Data", "0,16")
        .cache(0, 1, 1, "Instruction", "0,16")
        .cache(0, 2, 2, "Unified", "0,16")
        .cache(0, 3, 3, "Unified", "0-3,16-19")
        .file("devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "3700000")
        .file("devices/system/node/node0/cpulist", "0-7,16-23")
        .file("devices/system/node/node1/cpulist", "8-15,24-31")
        .file("devices/system/node/possible", "0-1")
        .file("devices/system/node/online", "0-1");
    let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7302 16-Core Processor\ncpu MHz\t\t: 1500.000\n";
    let t = read(tree.path(), cpuinfo, uname("x86_64")).unwrap();
    assert_eq!(t.online, (0..32).collect::<Vec<_>>());
    assert_eq!((t.packages, t.cpus_per_package), (2, 16));
    assert_eq!((t.cpus_per_l3, t.threads_per_core, t.numa_nodes), (8, 2, 2));
    assert_eq!(t.model, "AMD EPYC 7302 16-Core Processor");
    // cpufreq's maximum, not cpuinfo's current clock.
    assert_eq!(t.max_mhz, Some(3700.0));
}

/// An arm64 box: no `model name`, MIDR fields in cpuinfo, package ids of -1,
/// only the older `thread_siblings_list`, no L3 listed, CPU 0 offline.
#[test]
fn arm64_box_with_cpu_part_and_no_model_name() {
    let tree = Tree::new("arm64");
    tree.file("devices/system/cpu/online", "1-4");
    for cpu in 1..5 {
        let dir = format!("devices/system/cpu/cpu{cpu}/topology");
        tree.file(&format!("{dir}/physical_package_id"), "-1")
            .file(&format!("{dir}/thread_siblings_list"), &cpu.to_string());
    }
    tree.cache(1, 0, 1, "Data", "1").cache(1, 1, 1, "Instruction", "1").cache(1, 2, 2, "Unified", "1-2");
    let cpuinfo = "processor\t: 1\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n";
    let t = read(tree.path(), cpuinfo, uname("aarch64")).unwrap();
    assert_eq!(t.online, [1, 2, 3, 4]);
    assert_eq!((t.packages, t.cpus_per_package), (1, 4));
    // The last level listed is the L2, shared by CPUs 1 and 2.
    assert_eq!((t.cpus_per_l3, t.threads_per_core, t.numa_nodes), (2, 1, 1));
    assert_eq!(t.model, "implementer 0x41 part 0xd0c");
    assert_eq!(t.max_mhz, None);
    assert_eq!(t.arch, "aarch64");
}

#[test]
fn missing_online_file_is_an_io_error_naming_it() {
    let tree = Tree::new("empty");
    let e = read(tree.path(), "", uname("x86_64")).unwrap_err();
    assert!(matches!(&e, Error::Io { what, .. } if what.ends_with("devices/system/cpu/online")), "{e}");
}

#[test]
fn malformed_files_are_parse_errors_naming_the_file() {
    let tree = Tree::new("bad-online");
    tree.file("devices/system/cpu/online", "0-");
    let e = read(tree.path(), "", uname("x86_64")).unwrap_err();
    let expected = format!(
        "cannot parse {}: '0-' is not a CPU number or a range of them (a list reads like 0-3,8)",
        tree.path().join("devices/system/cpu/online").display()
    );
    assert_eq!(e.to_string(), expected);

    let tree = Tree::new("bad-package");
    tree.file("devices/system/cpu/online", "0").file("devices/system/cpu/cpu0/topology/physical_package_id", "zero");
    let e = read(tree.path(), "", uname("x86_64")).unwrap_err();
    assert!(matches!(&e, Error::Parse { what, .. } if what == "'zero' is not a number"), "{e}");

    let tree = Tree::new("bad-cache");
    tree.file("devices/system/cpu/online", "0").cache(0, 3, 3, "Unified", "0-3,2");
    let e = read(tree.path(), "", uname("x86_64")).unwrap_err();
    assert!(matches!(&e, Error::Parse { what, .. } if what == "CPU 2 is listed twice"), "{e}");
}

#[test]
fn unknown_model_and_no_clock_when_cpuinfo_says_neither() {
    let tree = Tree::new("bare");
    tree.file("devices/system/cpu/online", "0");
    let t = read(tree.path(), "processor\t: 0\nCPU part\t: 0xd0c\n", uname("riscv64")).unwrap();
    assert_eq!((t.model.as_str(), t.max_mhz), ("unknown", None));
    assert!(!t.broadcast_tlbi, "riscv64 is not known to broadcast TLB invalidations");
    // Nothing under cpu0: one package of one CPU, no SMT.
    assert_eq!((t.packages, t.cpus_per_package, t.cpus_per_l3, t.threads_per_core), (1, 1, 1, 1));
}

#[cfg(target_os = "linux")]
#[test]
fn reads_this_host_consistently() {
    let t = tlbkit_host::topology::read_host().unwrap();
    assert!(!t.online.is_empty());
    assert!(t.online.windows(2).all(|w| w[0] < w[1]), "{:?}", t.online);
    assert!(t.packages >= 1 && t.packages <= t.online.len());
    assert!(t.cpus_per_package >= 1 && t.cpus_per_package <= t.online.len());
    assert!(t.packages * t.cpus_per_package >= t.online.len());
    assert!(t.cpus_per_l3 >= 1 && t.cpus_per_l3 <= t.cpus_per_package);
    assert!(t.threads_per_core >= 1 && t.threads_per_core <= t.cpus_per_package);
    assert!(t.numa_nodes >= 1);
    assert!(t.max_mhz.is_none_or(|mhz| mhz > 0.0));
    assert!(!t.model.is_empty() && !t.arch.is_empty() && !t.kernel.is_empty());
    assert_eq!(t.arch, std::env::consts::ARCH);
}

#[cfg(not(target_os = "linux"))]
#[test]
fn host_is_not_linux() {
    assert!(matches!(tlbkit_host::topology::read_host(), Err(Error::NotLinux { .. })));
}

#[test]
fn broadcast_invalidation_is_every_arm64_cpu_and_an_x86_one_with_invlpgb() {
    let tree = Tree::new("bcast");
    tree.file("devices/system/cpu/online", "0");
    let x86 = |cpuinfo: &str| read(tree.path(), cpuinfo, uname("x86_64")).unwrap().broadcast_tlbi;
    assert!(!x86(X86_CPUINFO));
    assert!(!x86("processor\t: 0\nflags\t\t: fpu pcid invpcid invlpgbx\n"));
    assert!(x86("processor\t: 0\nflags\t\t: fpu pcid invpcid invlpgb rdpid\n"));
    assert!(read(tree.path(), "", uname("aarch64")).unwrap().broadcast_tlbi);
}
