//! The reader an import counts its progress through: every byte read, and
//! every line, reported to the caller's progress function.

use super::*;

impl<R: std::io::Read, F: FnMut(u64, u64)> std::io::Read for Counted<R, F> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.input.read(buf)?;
        self.count(n);
        Ok(n)
    }
}

impl<R: BufRead, F: FnMut(u64, u64)> BufRead for Counted<R, F> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.input.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.input.consume(n);
        self.count(n);
    }
}

impl<R, F: FnMut(u64, u64)> Counted<R, F> {
    pub(super) fn count(&mut self, n: usize) {
        let before = self.read;
        self.read += n as u64;
        // Once a mebibyte: reading calls this once a line.
        if self.read >> 20 != before >> 20 {
            (self.progress)(self.read, self.size);
        }
    }
}
