//! The subcommands of `tlbkit`, one module each, named like the command: its
//! flags (a `#[derive(Args)]` struct) and its body, which returns the exit code
//! (0 done, 3 violations found) or an error worded for the user (exit 2).
//!
//! Only commands live here. What several commands share to print and write
//! (`crate::table`, `crate::progress`, `crate::png`, `crate::files`) stays at
//! `src/`'s top level, so that this folder lists exactly the commands. [`Format`]
//! is the exception: it is not a helper but part of the flags themselves, the
//! value of the `--format` that most commands' flags share, so it is defined
//! beside them.

pub mod bench;
pub mod calibrate;
pub mod check;
pub mod compare;
pub mod list;
pub mod litmus;
pub mod plot;
pub mod reproduce;
pub mod run;
pub mod sweep;
pub mod trace;
pub mod validate;

use clap::ValueEnum;

/// How a command prints: `--format table`, aligned text for people (the
/// default), or `--format json`, one document whose fields other tools read.
// The variants carry no doc comments on purpose: clap would print them in every
// command's `--help`, which is part of the command line's contract.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}
