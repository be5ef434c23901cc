//! Compiling a C policy: the user's files, the shim tree, the glue, one
//! shared object, cached by content.
//!
//! The object's writable data is laid out for [`crate::load`]: an object
//! linked first (`begin.c`) opens `.data` with `tlbkit_data_begin`, the
//! user's files and the glue follow, and an object linked last (`heap.c`)
//! closes `.bss` with `tlbkit_heap`, a zeroed region larger than the
//! checker's arena. Everything from `tlbkit_data_begin` up to `tlbkit_heap`
//! is the policy's state (the file's globals and statics, the glue's mms and
//! TTBRs, the ops table); the heap after it serves the checker's executions.
//!
//! For the checker the user's files are compiled with `-fsanitize=thread`
//! and `-fsanitize-coverage=trace-pc`, whose calls the shipped runtime
//! (`tsan.c`) turns into plain-access reports and marks of the code that ran
//! ([`crate::coverage`]); the simulator's build is not instrumented.

use crate::elf::{self, Symbol};
use crate::error::Error;
use crate::runtime::SysregFns;
use crate::shim;
use crate::source::{Role, Sources};
use crate::Fnv;
use std::collections::HashMap;
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Bytes of the heap that follows the state: at least the checker's arena.
pub const HEAP_BYTES: usize = 65 << 20;

/// How a policy is built: the machine's shape and the kernel's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Options {
    /// CPUs (`NR_CPUS`).
    pub cpus: usize,
    /// Address-space slots, the kernel's (0) included.
    pub mm_slots: usize,
    /// The ASID width the machine reports (8 or 16), or another the checker
    /// explores (see `tlbkit/kernel.h`).
    pub asid_bits: u8,
    /// KPTI (`arm64_kernel_unmapped_at_el0`).
    pub kpti: bool,
    /// `FEAT_TLBIRANGE` (`system_supports_tlb_range`).
    pub tlbi_range: bool,
    /// `FEAT_TTCnP` (`system_supports_cnp`).
    pub cnp: bool,
    /// v4.19 to v5.19's atomic bitops ([`crate::source::Sources::early_bitops`]).
    pub early_bitops: bool,
    /// Built for the checker: plain accesses are instrumented and checked.
    pub checker: bool,
    /// x86's `tlb.c` against the x86 shims ([`Sources::x86`]).
    pub x86: bool,
    /// x86: `X86_FEATURE_INVLPGB` ([`Sources::invlpgb`]).
    pub invlpgb: bool,
    /// x86: page-table isolation (`X86_FEATURE_PTI`, `--set pti=on`).
    pub pti: bool,
    /// x86: every flush sampled by `consider_global_asid` ([`Sources::sample_every`]).
    pub sample_every: bool,
}

impl Options {
    /// The options of a machine of `cpus` CPUs and `mm_slots` address-space
    /// slots whose ASIDs are `asid_bits` wide, with no switch on, built for
    /// the simulator: set the others by name (`Options { checker: true,
    /// ..Options::machine(2, 4, 8) }`) and the file's with
    /// [`Options::with_sources`].
    pub const fn machine(cpus: usize, mm_slots: usize, asid_bits: u8) -> Options {
        Options {
            cpus,
            mm_slots,
            asid_bits,
            kpti: false,
            tlbi_range: false,
            cnp: false,
            early_bitops: false,
            checker: false,
            x86: false,
            invlpgb: false,
            pti: false,
            sample_every: false,
        }
    }

    /// Returns these options with the machine options the policy's name sets.
    pub fn with_sources(self, sources: &Sources) -> Options {
        Options {
            cnp: sources.cnp,
            early_bitops: sources.early_bitops,
            x86: sources.x86,
            invlpgb: sources.invlpgb,
            sample_every: sources.sample_every,
            ..self
        }
    }
}

/// A compiled policy: its object and what tlbkit knows of it. Copies of the
/// object are loaded from it ([`Lib::lease`]).
pub struct Lib {
    /// What messages call it (the first C file as named).
    pub name: String,
    /// The object.
    pub path: PathBuf,
    /// Its symbols.
    pub(crate) symbols: Vec<Symbol>,
    /// Whether the file's `check_and_switch_context` takes the CPU (before v5.10).
    pub switch_takes_cpu: bool,
    /// How it was built.
    pub options: Options,
    /// Loaded copies not in use (boxed: a copy's address is handed out).
    #[allow(clippy::vec_box)]
    pub(crate) pool: Mutex<Vec<Box<LoadedCopy>>>,
    /// How many copies were ever loaded (each a file of its own).
    pub(crate) copies: Mutex<usize>,
    /// The files compiled, as named, in the order given (the build's
    /// `user/{i}/` directories): what the object's line table names.
    pub(crate) code_files: Vec<(usize, String, String)>,
    /// [`Sources::digest`] of the files it was built from.
    pub(crate) digest: u64,
    /// The checker's build: one byte per byte of the object's code, set
    /// once a basic block whose instrumentation returns there ran, by any
    /// copy ([`Lib::mark_reached`]); empty for the simulator's build.
    pub(crate) reached: Box<[AtomicU8]>,
}

impl Lib {
    /// Compiles `sources` for `options` (or finds the object compiled before).
    pub fn build(sources: &Sources, options: &Options) -> Result<Arc<Lib>, Error> {
        let key = key(sources, options);
        let built = BUILT.get_or_init(Default::default);
        // One build at a time in a process: two threads asking for the same
        // object wait for one compilation.
        let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lib) = built.get(&key) {
            return Ok(lib.clone());
        }
        let lib = Arc::new(compile(sources, options, key)?);
        built.insert(key, lib.clone());
        Ok(lib)
    }

    /// Returns every object this process built for the checker from files
    /// of `digest` ([`Sources::digest`]): a check's shapes each have theirs.
    pub(crate) fn checked(digest: u64) -> Vec<Arc<Lib>> {
        let Some(built) = BUILT.get() else { return Vec::new() };
        let built = built.lock().unwrap_or_else(|e| e.into_inner());
        built.values().filter(|l| l.options.checker && l.digest == digest).cloned().collect()
    }

    /// Marks the code at offset `off` of the object as reached (the return
    /// address of its basic block's coverage call).
    pub(crate) fn mark_reached(&self, off: usize) {
        if let Some(b) = self.reached.get(off) {
            // Relaxed: a mark read once the check is over; loaded first so
            // that code run again does not write its line again.
            if b.load(Ordering::Relaxed) == 0 {
                b.store(1, Ordering::Relaxed);
            }
        }
    }

    /// Returns the symbol `name` (an object or function of the file or glue).
    pub(crate) fn symbol(&self, name: &str) -> Option<&Symbol> {
        self.symbols.iter().find(|s| s.name == name)
    }
}

/// Every object this process built, by key ([`Lib::build`]).
static BUILT: OnceLock<Mutex<HashMap<u64, Arc<Lib>>>> = OnceLock::new();

/// Returns the key of a build: the shims, the files, the options that
/// change the object, and the compiler.
fn key(sources: &Sources, options: &Options) -> u64 {
    let mut h = Fnv::new();
    h.write(&shim::version().to_le_bytes());
    for f in &sources.files {
        h.write(f.file_name.as_bytes());
        h.write(&f.text);
    }
    // The name's options too (`+invlpgb=on`, `+cnp=on`): a build answers for
    // one policy's checks (its coverage is looked up by this digest).
    h.write(&sources.digest().to_le_bytes());
    h.write(&(options.cpus as u64).to_le_bytes());
    h.write(&(options.mm_slots as u64).to_le_bytes());
    h.write(&[u8::from(options.checker), u8::from(options.kpti)]);
    if options.x86 {
        h.write(b"x86");
        // X86_CR3_PCID_BITS is compiled in.
        h.write(&[options.asid_bits]);
    }
    // The checker's instrumentation (see `compile`).
    h.write(b"-fsanitize=thread -fsanitize-coverage=trace-pc");
    h.write(compiler().unwrap_or_default().as_bytes());
    h.finish()
}

/// Returns the C compiler to use: `$TLBKIT_CC`, or `cc`, if it runs.
pub fn compiler() -> Result<String, Error> {
    static CC: OnceLock<Result<String, String>> = OnceLock::new();
    CC.get_or_init(|| {
        let cc = std::env::var("TLBKIT_CC").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "cc".to_string());
        match Command::new(&cc).arg("--version").output() {
            Ok(o) if o.status.success() => Ok(cc),
            _ => Err(cc),
        }
    })
    .clone()
    .map_err(|tried| Error::NoCompiler { tried })
}

/// Returns whether the compiler is gcc (which takes `--param` tuning).
fn cc_is_gcc() -> bool {
    static GCC: OnceLock<bool> = OnceLock::new();
    *GCC.get_or_init(|| {
        compiler().ok().and_then(|cc| Command::new(cc).arg("--version").output().ok()).is_some_and(|o| {
            let v = String::from_utf8_lossy(&o.stdout);
            !v.contains("clang") && (v.contains("gcc") || v.contains("GCC") || v.contains("Free Software"))
        })
    })
}

/// Returns whether a C compiler is available (C policies can be built).
pub fn have_compiler() -> bool {
    compiler().is_ok()
}

/// Returns the directory builds are cached in.
fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("TLBKIT_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("c");
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("tlbkit").join("c");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(h).join(".cache").join("tlbkit").join("c");
    }
    std::env::temp_dir().join("tlbkit-cache").join("c")
}

/// Returns whether the file's `check_and_switch_context` takes a second
/// parameter (the CPU, as before v5.10), reading its definition.
fn switch_takes_cpu(text: &str) -> Option<bool> {
    let at = text.match_indices("check_and_switch_context(").find(|(i, _)| {
        let line_start = text[..*i].rfind('\n').map_or(0, |n| n + 1);
        text[line_start..*i].trim_start().starts_with("void")
    })?;
    let rest = &text[at.0 + at.1.len()..];
    let params = &rest[..rest.find(')')?];
    Some(params.contains(','))
}

/// Returns whether `cpu_switch_mm` writes the reserved TTBR0 before calling
/// the file's `cpu_do_switch_mm`, as it did from v4.16 until the file's
/// function did it itself (see `asm/mmu_context.h` of the shims): when the
/// file defines `cpu_do_switch_mm` without `cpu_set_reserved_ttbr0_nosync`.
fn switch_mm_reserves(texts: &[String]) -> bool {
    texts.iter().any(|t| t.contains("void cpu_do_switch_mm("))
        && !texts.iter().any(|t| t.contains("cpu_set_reserved_ttbr0_nosync"))
}

/// Returns whether the file's `check_and_switch_context` takes the CPU
/// (arm64 before v5.10; false for x86), having checked that the files
/// define the switch their architecture's glue calls: one line naming the
/// other architecture when they are its.
fn switch_entry(sources: &Sources, texts: &[String], options: &Options, name: &str) -> Result<bool, Error> {
    let code = || sources.files.iter().zip(texts).filter(|(f, _)| f.role == Role::Code).map(|(_, t)| t.as_str());
    let defines = |f: &str| code().any(|t| defines_function(t, f));
    let takes_cpu = if options.x86 {
        if !(5..=12).contains(&options.asid_bits) {
            return Err(Error::Spec(format!(
                "{name}: an x86 tlb.c's PCID space is 32 to 4096 PCIDs (X86_CR3_PCID_BITS 5 to 12), not {} bits",
                options.asid_bits
            )));
        }
        if !defines("switch_mm_irqs_off") {
            return Err(if defines("check_and_switch_context") {
                Error::Spec(format!(
                    "{name} is arm64's (it defines check_and_switch_context), not x86's tlb.c: add +arch=arm64 to \
                     its name (c:{name}+arch=arm64)"
                ))
            } else {
                Error::Missing {
                    file: name.to_string(),
                    function: "switch_mm_irqs_off()".into(),
                    why: "at every context switch (x86's tlb.c defines it)".into(),
                }
            });
        }
        false
    } else {
        match code().find_map(switch_takes_cpu) {
            Some(t) => t,
            None if defines("switch_mm_irqs_off") => {
                return Err(Error::Spec(format!(
                    "{name} is x86's (it defines switch_mm_irqs_off), not arm64's context.c: add +arch=x86 to its \
                     name (c:{name}+arch=x86)"
                )))
            }
            None => {
                return Err(Error::Missing {
                    file: name.to_string(),
                    function: "check_and_switch_context()".into(),
                    why: "at every context switch (arm64's switch_mm calls it)".into(),
                })
            }
        }
    };
    Ok(takes_cpu)
}

/// Compiles and links; the object lands in the cache under `key`.
fn compile(sources: &Sources, options: &Options, key: u64) -> Result<Lib, Error> {
    let cc = compiler()?;
    let name = sources.main_name().to_string();
    let texts: Vec<String> = sources.files.iter().map(|f| String::from_utf8_lossy(&f.text).into_owned()).collect();
    let takes_cpu = switch_entry(sources, &texts, options, &name)?;
    let root = cache_root();
    let dir = root.join(format!("{key:016x}"));
    let so = dir.join("policy.so");
    if !so.exists() {
        let tmp = root.join(format!("{key:016x}.tmp{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let io = |e: std::io::Error| Error::Load { path: tmp.display().to_string(), why: e.to_string() };
        std::fs::create_dir_all(tmp.join("include")).map_err(io)?;
        write_tree(&tmp, sources, &texts, options.x86).map_err(io)?;
        let log = root.join(format!("{key:016x}.log"));
        let defines = [
            format!("-DNR_CPUS={}", options.cpus),
            format!("-DTLBKIT_MMS={}", options.mm_slots),
            format!("-DTLBKIT_SWITCH_TAKES_CPU={}", u8::from(takes_cpu)),
            format!("-DTLBKIT_SWITCH_MM_RESERVES={}", u8::from(switch_mm_reserves(&texts))),
            // A kernel with KPTI support runs on a CPU that needs it; without, the kernel has none.
            if options.kpti { "-DCONFIG_UNMAP_KERNEL_AT_EL0=1".into() } else { "-DTLBKIT_NO_KPTI=1".into() },
            // Which shim tree (for the compiler's messages).
            if options.x86 { "-DTLBKIT_X86=1".into() } else { "-DTLBKIT_ARM64=1".into() },
            // The checker's build (the x86 shims' clock; see tlbkit/x86.h).
            if options.checker { "-DTLBKIT_CHECKER=1".into() } else { "-DTLBKIT_SIMULATOR=1".into() },
            // x86: the PCID space the file sizes its ASIDs from (X86_CR3_PCID_BITS).
            format!("-DTLBKIT_PCID_BITS={}", if options.x86 { options.asid_bits } else { 12 }),
            // x86 before v4.15 (the file builds no CR3 itself): the headers of v4.14.
            format!("-DTLBKIT_X86_V414={}", u8::from(options.x86 && !x86_builds_cr3(&texts))),
            // x86 before v5.13 (the file defines native_flush_tlb_others): kernel/smp.c of then.
            format!(
                "-DTLBKIT_X86_SMP_V512={}",
                u8::from(options.x86 && defines_any(&texts, "native_flush_tlb_others"))
            ),
        ];
        let common: Vec<String> = [
            "-std=gnu11",
            "-O1",
            "-g",
            "-fPIC",
            "-fno-common",
            "-fno-builtin",
            "-fno-stack-protector",
            "-funwind-tables",
            "-fno-omit-frame-pointer",
            "-ffreestanding",
            "-D__KERNEL__",
            "-Werror=implicit-function-declaration",
            "-Iuser/include",
            "-Iinclude",
            "-c",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(defines.iter().cloned())
        .collect();
        let mut objects = vec!["begin.o".to_string()];
        for (i, (f, _)) in sources.files.iter().zip(&texts).enumerate().filter(|(_, (f, _))| f.role == Role::Code) {
            let obj = format!("u{i}.o");
            let mut args = common.clone();
            if options.checker {
                args.push("-fsanitize=thread".into());
                // A call at every basic block: what a check reached (gcc and clang).
                args.push("-fsanitize-coverage=trace-pc".into());
                // Only the accesses: no function entry and exit calls (gcc's option; clang ignores --param).
                if cc_is_gcc() {
                    args.push("--param=tsan-instrument-func-entry-exit=0".into());
                }
            }
            args.extend([format!("user/{i}/{}", f.file_name), "-o".into(), obj.clone()]);
            run_cc(&cc, &tmp, &args, &f.name, &log)?;
            objects.push(obj);
        }
        for (src, obj) in [
            ("glue.c", "glue.o"),
            ("common.c", "common.o"),
            ("tsan.c", "tsan.o"),
            ("begin.c", "begin.o"),
            ("heap.c", "heap.o"),
        ] {
            let mut args = common.clone();
            args.extend([src.to_string(), "-o".into(), obj.to_string()]);
            run_cc(&cc, &tmp, &args, &format!("tlbkit's {src} with {name}"), &log)?;
        }
        objects.extend(["glue.o", "common.o", "tsan.o", "heap.o"].map(String::from));
        let mut link: Vec<String> = ["-shared", "-nostdlib", "-Wl,--no-undefined", "-Wl,-Bsymbolic", "-o", "policy.so"]
            .map(String::from)
            .into();
        link.extend(objects);
        run_cc(&cc, &tmp, &link, &name, &log)?;
        // Another process may have finished the same build first: its object is as good.
        if std::fs::rename(&tmp, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
            if !so.exists() {
                return Err(Error::Load {
                    path: dir.display().to_string(),
                    why: "cannot move the build into place".into(),
                });
            }
        }
    }
    let bytes = std::fs::read(&so).map_err(|e| Error::Load { path: so.display().to_string(), why: e.to_string() })?;
    let symbols = elf::symbols(&bytes).map_err(|why| Error::Load { path: so.display().to_string(), why })?;
    let code_end = symbols.iter().filter(|s| !s.object).map(|s| s.value + s.size).max().unwrap_or(0) as usize;
    let code_files = sources
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| f.role == Role::Code)
        .map(|(i, f)| (i, f.name.clone(), f.file_name.clone()))
        .collect();
    Ok(Lib {
        code_files,
        digest: sources.digest(),
        reached: if options.checker { (0..code_end).map(|_| AtomicU8::new(0)).collect() } else { Box::default() },
        name,
        path: so,
        symbols,
        switch_takes_cpu: takes_cpu,
        options: *options,
        pool: Mutex::new(Vec::new()),
        copies: Mutex::new(0),
    })
}

/// Returns whether one of `texts` defines the function `name`.
fn defines_any(texts: &[String], name: &str) -> bool {
    texts.iter().any(|t| defines_function(t, name))
}

/// Returns whether an x86 file builds its CR3 values itself (`build_cr3`, in
/// `tlb.c` from v4.15's page-table isolation on); before, `asm/mmu_context.h`
/// did, and `asm/tlbflush.h` held the flush primitives later files define.
fn x86_builds_cr3(texts: &[String]) -> bool {
    defines_any(texts, "build_cr3")
}

/// Returns whether `text` defines the function `name`: `name(` after a
/// type on its line (not a call, an assignment or a `return`), and a `{`
/// before any `;` after it (not a prototype).
fn defines_function(text: &str, name: &str) -> bool {
    text.match_indices(&format!("{name}(")).any(|(i, _)| {
        let line_start = text[..i].rfind('\n').map_or(0, |n| n + 1);
        let before = text[line_start..i].trim();
        let typed = !before.is_empty()
            && !before.contains(['=', '(', ')'])
            && !before.starts_with("return")
            && before.split_whitespace().all(|w| w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*'));
        let after = &text[i..];
        typed && after.find([';', '{']).is_some_and(|k| after.as_bytes()[k] == b'{')
    })
}

/// Writes the shim tree of the file's architecture, the user's files
/// (headers under `user/include/asm`, with their asm statements translated)
/// and the layout objects.
fn write_tree(dir: &Path, sources: &Sources, texts: &[String], x86: bool) -> std::io::Result<()> {
    let put = |rel: &str, text: &str| -> std::io::Result<()> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)
    };
    for (path, text) in shim::files(x86) {
        put(path, text)?;
    }
    let (aliases, main) = shim::aliases(x86);
    for alias in aliases {
        put(
            &format!("include/{alias}"),
            &format!(
                "/* SPDX-License-Identifier: MIT OR Apache-2.0 */\n/* tlbkit shim: the interface is {main}. */\n#include <{main}>\n"
            ),
        )?;
    }
    std::fs::create_dir_all(dir.join("user/include/asm"))?;
    for (i, (f, text)) in sources.files.iter().zip(texts).enumerate() {
        let text = crate::asm::rewrite(text);
        match &f.role {
            Role::Header(h) => put(&format!("user/include/asm/{h}"), &text)?,
            Role::Code => put(&format!("user/{i}/{}", f.file_name), &text)?,
        }
    }
    put(
        "begin.c",
        "/* The first object: opens the state. */\n__attribute__((aligned(4096))) long tlbkit_data_begin = 1;\n",
    )?;
    put(
        "heap.c",
        &format!(
            "/* The last object: the heap after the state. */\n__attribute__((aligned(4096))) char tlbkit_heap[{HEAP_BYTES}];\n"
        ),
    )
}

/// Runs the compiler in `dir`; on failure, returns its first error and what
/// the shims seem to lack, having written its output to `log`.
fn run_cc(cc: &str, dir: &Path, args: &[String], file: &str, log: &Path) -> Result<(), Error> {
    let out = Command::new(cc)
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(|e| Error::NoCompiler { tried: format!("{cc}: {e}") })?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "$ {cc} {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::write(log, &text);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(missing) = stderr
        .lines()
        .find_map(|l| l.split_once("undefined reference to `").and_then(|(_, r)| r.split_once('\'')).map(|(f, _)| f))
    {
        let needed = ["check_and_switch_context", "__tlbkit_early_initcall"];
        if needed.contains(&missing) {
            return Err(Error::Missing {
                file: file.to_string(),
                function: format!("{missing}()"),
                why: "to switch address spaces".into(),
            });
        }
        return Err(Error::Compile {
            file: file.to_string(),
            first: format!("undefined reference to {missing}"),
            hint: format!(": the shims do not provide {missing}"),
            log: log.display().to_string(),
        });
    }
    let first =
        stderr.lines().find(|l| l.contains("error")).unwrap_or_else(|| stderr.lines().next().unwrap_or("")).trim();
    let first = first.split_once("user/").map_or(first, |(_, r)| r.split_once('/').map_or(r, |(_, r)| r));
    let main = if args.iter().any(|a| a == "-DTLBKIT_X86=1") { "tlbkit/x86.h" } else { "tlbkit/kernel.h" };
    let hint = shim_hint(first, main);
    Err(Error::Compile { file: file.to_string(), first: first.to_string(), hint, log: log.display().to_string() })
}

/// Says which shim a compiler error points at, if it can tell.
fn shim_hint(error: &str, main: &str) -> String {
    if let Some((_, rest)) = error.split_once("fatal error: ") {
        if let Some((header, _)) = rest.split_once(": No such file") {
            return format!(" (tlbkit's shims have no <{header}>)");
        }
    }
    let lacks = ["implicit declaration", "undeclared", "unknown type name", "has no member", "undefined"];
    if !lacks.iter().any(|l| error.contains(l)) {
        return String::new();
    }
    for marker in ["implicit declaration of function ", "\u{2018}", "'"] {
        if let Some((_, rest)) = error.split_once(marker) {
            let ident: String = rest
                .trim_start_matches(['\'', '\u{2018}'])
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !ident.is_empty() {
                return format!(" (the shims lack {ident}: {main} has the kernel interface it provides)");
            }
        }
    }
    String::new()
}

/// The glue's entry points, as the copy has them.
#[derive(Clone, Copy)]
pub struct Entries {
    pub boot: extern "C-unwind" fn() -> c_int,
    pub mm_init: extern "C-unwind" fn(u32),
    pub switch_mm: extern "C-unwind" fn(u32),
    pub flush_page: extern "C-unwind" fn(u32, u64),
    pub flush_range: extern "C-unwind" fn(u32, u64, u64),
    pub flush_mm: extern "C-unwind" fn(u32),
    pub flush_kernel_range: extern "C-unwind" fn(u64, u64),
    pub tlbbatch_add_pending: extern "C-unwind" fn(u32, u64),
    pub tlbbatch_flush: extern "C-unwind" fn(),
    pub flush_batched_pending: extern "C-unwind" fn(u32),
    /// arm64's glue: the system registers its `msr` and `mrs` reach.
    pub sysregs: Option<SysregFns>,
    /// x86's glue: `destroy_context` (the mm's global ASID goes back).
    pub mm_release: Option<extern "C-unwind" fn(u32)>,
    /// x86's glue: `arch_tlbbatch_should_defer`.
    pub tlbbatch_should_defer: Option<extern "C-unwind" fn(u32) -> c_int>,
}

/// One loaded copy.
pub struct LoadedCopy {
    /// Where the object's address 0 is.
    pub load_base: usize,
    /// The first byte of the state (`tlbkit_data_begin`).
    pub base: usize,
    /// The state's bytes (up to `tlbkit_heap`).
    pub prefix: usize,
    /// The state as the loader left it, with the ops table filled in.
    pub pristine: Vec<u8>,
    /// The entry points.
    pub entries: Entries,
}

#[cfg(test)]
mod tests {
    use super::defines_function;

    #[test]
    fn a_definition_is_told_from_a_call_a_prototype_and_an_assignment() {
        let text = "static struct new_asid choose_new_asid(struct mm_struct *next,\n\t\tu64 gen)\n{\n\tns = f();\n}\n\
                    void g(void);\nint h(void) { return g(); }\n\tx = choose(1);\n\treturn k(2);\n\tk(3);\n";
        assert!(defines_function(text, "choose_new_asid"));
        assert!(defines_function(text, "h"));
        assert!(!defines_function(text, "g"), "a prototype and a call");
        assert!(!defines_function(text, "f") && !defines_function(text, "choose") && !defines_function(text, "k"));
    }
}
