//! `tlbkit trace import` and `tlbkit trace dump`: traces of real programs, made
//! from valgrind's and strace's logs and printed as text (the format and the
//! import are `tlbkit_sim::trace` and `tlbkit_lab::trace`).

use crate::error::CliError;
use crate::files::check_writable;
use crate::progress::{self, Unit};
use clap::Subcommand;
use std::path::PathBuf;

/// `tlbkit trace`'s subcommands and their flags.
#[derive(Subcommand)]
pub enum TraceCmd {
    /// Convert valgrind lackey output, and strace -f output of the same run, into a
    /// trace that `--workload trace --set file=TRACE` replays.
    Import {
        /// The log of `valgrind --tool=lackey --trace-mem=yes --log-file=FILE` (with
        /// --trace-syscalls=yes when --strace is given; --trace-sched=yes to give
        /// each thread its own references).
        #[arg(long)]
        lackey: PathBuf,
        /// The log of `strace -f -tt -o FILE` run around that valgrind.
        #[arg(long)]
        strace: Option<PathBuf>,
        /// The trace file to write (through a temporary file and a rename).
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Keep only the count of instruction fetches, not the code pages they touch.
        #[arg(long)]
        no_ifetch: bool,
    },
    /// Print a trace as text, one record a line.
    Dump { trace: PathBuf },
}

/// Runs `tlbkit trace import` or `tlbkit trace dump`; returns the exit code.
pub fn trace(cmd: TraceCmd) -> Result<u8, CliError> {
    match cmd {
        TraceCmd::Import { lackey, strace, output, no_ifetch } => {
            check_writable(&output, "-o", false)?;
            let opts = tlbkit_lab::trace::import::Options { ifetch: !no_ifetch };
            let bar = progress::bar(0, Unit::Bytes);
            bar.set_message(format!("of {}", lackey.display()));
            let report =
                tlbkit_lab::trace::import::import_file(&lackey, strace.as_deref(), &output, opts, |read, size| {
                    bar.set_length(size);
                    bar.set_position(read);
                });
            bar.finish_and_clear();
            println!("{}", report?);
            Ok(0)
        }
        TraceCmd::Dump { trace } => {
            let t = tlbkit_sim::trace::Trace::read_file(&trace)?;
            t.dump(&mut std::io::BufWriter::new(std::io::stdout().lock())).map_err(|e| e.to_string())?;
            Ok(0)
        }
    }
}
