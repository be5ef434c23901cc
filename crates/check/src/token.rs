//! The replay token: a check's spec and one schedule in a shell-safe string
//! (`tlbkit replay TOKEN`), with its format version and checksum.

use crate::error::Error;
use crate::shape::{memory_text, parse_memory};
use crate::spec::{menu_offered, CheckSpec, Mode};
use std::fmt::Write as _;
use tlbkit_policy::contpte::Teardown;

/// Token format version. Older formats are refused: `t1` and `t2` carried no
/// checksum (a mistyped one would have replayed another schedule), `t3`
/// carried no page count and was recorded on the kernel model before Linux's
/// per-operation locking, and `t4` was recorded when a spin lock was taken
/// with a load before its compare-and-exchange (a step of its own), so the
/// choices of either would replay another schedule.
const TOKEN_VERSION: &str = "t5";

/// Returns the CRC-32 (IEEE 802.3, reflected, as zlib computes it) of `bytes`:
/// the token's checksum. A CRC detects every error burst of up to 32 bits, so a
/// mistyped character, or two neighbouring ones swapped, never passes.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// Encodes a spec and a schedule as a shell-safe token:
/// `t5~POLICY~CPUS~MMS~PAGES~ASIDS~OPS~MEMORY~MENU~TEARDOWN~CHOICES~CRC`, where
/// MEMORY is the memory model's name, with `+any` when invalidations may
/// complete at any point ([`crate::shape::Completion::Any`]; tokens without it read as
/// before), MENU is
/// the operation kinds' mask in hex (without `tick` for a policy that does not
/// tick, so its tokens read as before ticks existed), TEARDOWN the contiguous block's strategy
/// (`-` without one), each choice a base-36 digit (`(N)` for 35 and up) with
/// `zN.` standing for N zeros (a schedule of no choices is written `0`, which
/// replays the same way), and CRC the [`crc32`] of everything before it, as
/// eight hex digits.
pub fn encode(spec: &CheckSpec, choices: &[u32]) -> String {
    let mut s = format!(
        "{TOKEN_VERSION}~{}~{}~{}~{}~{}~{}~{}~{:x}~{}~",
        spec.policy,
        spec.cpus,
        spec.mms,
        spec.pages,
        spec.asids,
        spec.ops,
        memory_text(spec.memory, spec.completion),
        menu_offered(spec),
        spec.teardown.map_or("-", |t| t.name()),
    );
    if choices.is_empty() {
        s.push('0');
    }
    let mut i = 0;
    while i < choices.len() {
        let c = choices[i];
        if c == 0 {
            let run = choices[i..].iter().take_while(|&&x| x == 0).count();
            if run >= 3 {
                let _ = write!(s, "z{run}.");
                i += run;
                continue;
            }
        }
        // 'z' (35) would read as a zero run: 35 and up go in parentheses.
        if c < 35 {
            s.push(char::from_digit(c, 36).expect("a base-36 digit"));
        } else {
            let _ = write!(s, "({c})");
        }
        i += 1;
    }
    let crc = crc32(s.as_bytes());
    let _ = write!(s, "~{crc:08x}");
    s
}

/// The most choices a token may hold (a zero run counts its zeros): far more
/// than any execution of the checker's bounded shapes makes.
const MAX_TOKEN_CHOICES: usize = 1_000_000;

/// Decodes a token made by [`encode`], refusing one whose checksum does not match.
pub fn decode(token: &str) -> Result<(CheckSpec, Vec<u32>), Error> {
    let shown: String = token.chars().take(120).collect();
    let shown = if shown.len() < token.len() { format!("{shown}...") } else { shown };
    let bad = |why: &str| Error::BadToken { shown: shown.clone(), why: why.to_string() };
    if token.starts_with("t1~") || token.starts_with("t2~") {
        return Err(bad("a token from an older tlbkit, which carried no checksum; run the `tlbkit check` that \
                        printed it again for a t5 token"));
    }
    if token.starts_with("t4~") {
        return Err(bad("a t4 token from an older tlbkit, recorded when taking a spin lock was two steps (a load, \
                        then the compare-and-exchange), so its choices would replay another schedule; run the \
                        `tlbkit check` that printed it again for a t5 token"));
    }
    if token.starts_with("t3~") {
        return Err(bad("a t3 token from an older tlbkit, recorded before address spaces had several pages and \
                        Linux's per-operation locking, so its choices would replay another schedule; run the \
                        `tlbkit check` that printed it again (add --pages 1 for the old shape) for a t5 token"));
    }
    let parts: Vec<&str> = token.split('~').collect();
    if parts.first() != Some(&TOKEN_VERSION) || parts.len() != 12 {
        return Err(bad("expected t5~POLICY~CPUS~MMS~PAGES~ASIDS~OPS~MEMORY~MENU~TEARDOWN~CHOICES~CRC"));
    }
    let (body, sum) = token.rsplit_once('~').expect("twelve fields");
    let crc = u32::from_str_radix(sum, 16).ok().filter(|_| sum.len() == 8);
    if crc != Some(crc32(body.as_bytes())) {
        return Err(bad("its checksum does not match: a character was mistyped, lost or added"));
    }
    let teardown = match parts[9] {
        "-" => None,
        name => Some(Teardown::from_name(name).map_err(|e| bad(&e.to_string()))?),
    };
    let menu = u32::from_str_radix(parts[8], 16).map_err(|_| bad("MENU is not a hex mask"))?;
    let num = |s: &str, what: &str| s.parse::<u64>().map_err(|_| bad(&format!("{what} is not a number")));
    let (memory, completion) =
        parse_memory(parts[7]).ok_or_else(|| bad("the memory model is none of sc, tso and arm (each perhaps +any)"))?;
    let small = |s: &str, what: &str| {
        num(s, what).and_then(|n| u32::try_from(n).map_err(|_| bad(&format!("{what} is out of range"))))
    };
    let spec = CheckSpec {
        policy: parts[1].to_string(),
        cpus: small(parts[2], "CPUS")? as usize,
        mms: small(parts[3], "MMS")? as usize,
        pages: small(parts[4], "PAGES")? as usize,
        asids: small(parts[5], "ASIDS")?,
        ops: small(parts[6], "OPS")? as usize,
        mode: Mode::Exhaustive,
        iterations: 1,
        seed: 0,
        memory,
        menu,
        teardown,
        completion,
    };
    let text = parts[10];
    if text.is_empty() {
        return Err(bad("it has no choices"));
    }
    let mut choices = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'z' => {
                let end = text[i..].find('.').ok_or_else(|| bad("a zero run has no end"))? + i;
                let n = num(&text[i + 1..end], "a zero run")? as usize;
                if n > MAX_TOKEN_CHOICES - choices.len() {
                    return Err(bad("it has too many choices"));
                }
                choices.extend(std::iter::repeat_n(0, n));
                i = end + 1;
            }
            b'(' => {
                let end = text[i..].find(')').ok_or_else(|| bad("a '(' has no ')'"))? + i;
                choices.push(small(&text[i + 1..end], "a choice")?);
                i = end + 1;
            }
            c => {
                let d = (c as char).to_digit(36).ok_or_else(|| bad("a choice is not a base-36 digit"))?;
                choices.push(d);
                i += 1;
            }
        }
        if choices.len() > MAX_TOKEN_CHOICES {
            return Err(bad("it has too many choices"));
        }
    }
    // A run of no zeros (`z0.`) alone spells no choice either.
    if choices.is_empty() {
        return Err(bad("it has no choices"));
    }
    Ok((spec, choices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{Completion, Memory};

    #[test]
    fn a_token_whose_choices_spell_no_choice_is_refused() {
        // A zero run of no zeros decoded to an empty schedule, which `encode`
        // writes as one zero choice: the replay_token fuzz target's round trip
        // (decode, encode, decode) would not have given the schedule back.
        let body = "t5~arm64-linux~2~3~1~4~6~sc~3ff~-~z0.";
        let e = decode(&format!("{body}~{:08x}", crc32(body.as_bytes()))).unwrap_err();
        assert!(matches!(&e, Error::BadToken { why, .. } if why == "it has no choices"), "{e:?}");
        assert!(e.to_string().starts_with("not a tlbkit replay token (it has no choices)"), "{e}");
        let spec = CheckSpec {
            policy: "arm64-linux".into(),
            cpus: 2,
            mms: 3,
            pages: 1,
            asids: 4,
            ops: 6,
            mode: Mode::Exhaustive,
            iterations: 1,
            seed: 0,
            memory: Memory::Sc,
            menu: 0x3ff,
            teardown: None,
            completion: Completion::Latest,
        };
        let token = encode(&spec, &[0, 0, 0, 7, 40]);
        assert_eq!(token, "t5~arm64-linux~2~3~1~4~6~sc~3ff~-~z3.7(40)~491f3fe7");
        assert_eq!(decode(&token).ok(), Some((spec.clone(), vec![0, 0, 0, 7, 40])));
        // Completion at any point reads back from the memory field; tokens without it read as before.
        let any = CheckSpec { completion: Completion::Any, ..spec };
        let token = encode(&any, &[1, 2]);
        assert!(token.contains("~sc+any~"), "{token}");
        assert_eq!(decode(&token).map(|(s, c)| (s.completion, c)).ok(), Some((Completion::Any, vec![1, 2])));
    }
}
