//! Aligned text tables for the commands' `table` output.
//!
//! What is guaranteed: every column is as wide as its widest cell, header
//! included, counted in characters (so `µ` takes one column, as a terminal
//! shows it); names are left-aligned and numbers right-aligned; columns are two
//! spaces apart; no line ends in spaces. What is not: alignment of characters
//! a terminal draws two columns wide, which no table here contains.

use std::fmt::Write;

/// How a column's cells sit in its width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Names and other text.
    Left,
    /// Numbers.
    Right,
}

/// The space between two columns.
const GAP: &str = "  ";

/// A line of a table: its cells, or text that is not part of the columns.
enum Line {
    Cells(Vec<String>),
    /// Printed as it is (a section's title).
    Text(String),
    /// Printed under the second column (a remark on the row above).
    Note(String),
}

/// A table: an optional header, rows, and lines of text between them.
pub struct Table {
    align: Vec<Align>,
    indent: String,
    lines: Vec<Line>,
}

impl Table {
    /// Returns an empty table whose columns align as given.
    pub fn new(align: &[Align]) -> Table {
        Table { align: align.to_vec(), indent: String::new(), lines: Vec::new() }
    }

    /// Returns the table with every row and the header indented by `indent`.
    pub fn indented(mut self, indent: &str) -> Table {
        self.indent = indent.to_string();
        self
    }

    /// Adds a row of cells, one per column; the header is a row like any other.
    ///
    /// # Panics
    ///
    /// If the number of cells is not the number of columns.
    pub fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) {
        let cells: Vec<String> = cells.into_iter().map(|c| c.to_string()).collect();
        assert_eq!(cells.len(), self.align.len(), "one cell per column: {cells:?}");
        self.lines.push(Line::Cells(cells));
    }

    /// Adds a line of text printed as it is, outside the columns.
    pub fn text(&mut self, text: impl Into<String>) {
        self.lines.push(Line::Text(text.into()));
    }

    /// Adds a line of text that starts under the second column.
    pub fn note(&mut self, text: impl Into<String>) {
        self.lines.push(Line::Note(text.into()));
    }

    /// Returns the table's text, every line ending in a newline.
    pub fn render(&self) -> String {
        let mut width = vec![0; self.align.len()];
        for line in &self.lines {
            if let Line::Cells(cells) = line {
                for (w, c) in width.iter_mut().zip(cells) {
                    *w = (*w).max(c.chars().count());
                }
            }
        }
        let mut out = String::new();
        for line in &self.lines {
            match line {
                Line::Text(t) => out.push_str(t),
                Line::Note(t) => {
                    let under = self.indent.chars().count() + width.first().map_or(0, |w| w + GAP.len());
                    let _ = write!(out, "{:under$}{t}", "");
                }
                Line::Cells(cells) => {
                    let mut l = self.indent.clone();
                    for (i, ((c, w), a)) in cells.iter().zip(&width).zip(&self.align).enumerate() {
                        if i > 0 {
                            l.push_str(GAP);
                        }
                        let pad = w - c.chars().count();
                        match a {
                            Align::Left => {
                                l.push_str(c);
                                l.extend(std::iter::repeat_n(' ', pad));
                            }
                            Align::Right => {
                                l.extend(std::iter::repeat_n(' ', pad));
                                l.push_str(c);
                            }
                        }
                    }
                    out.push_str(l.trim_end());
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Align::{Left, Right};

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_counted_in_characters() {
        let mut t = Table::new(&[Left, Right, Left]).indented("  ");
        t.row(["name", "time", "note"]);
        t.row(["a", "1.5 µs", "x"]);
        t.text("section:");
        t.row(["longer name", "12345.25 µs", ""]);
        t.note("a remark");
        let lines = [
            "  name                time  note",
            "  a                 1.5 µs  x",
            "section:",
            "  longer name  12345.25 µs",
            "               a remark",
        ];
        assert_eq!(t.render(), lines.map(|l| format!("{l}\n")).concat());
    }

    #[test]
    #[should_panic(expected = "one cell per column")]
    fn a_row_of_the_wrong_length_is_refused() {
        Table::new(&[Left, Right]).row(["only one"]);
    }
}
