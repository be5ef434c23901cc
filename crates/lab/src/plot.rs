//! Pictures of results: charts drawn as SVG by hand ([`chart`]), the runs of a
//! sweep's results file gathered into charts ([`data`]), and self-contained
//! HTML pages of charts and ministat tables ([`html`]).
//!
//! What is guaranteed: the same input gives byte-identical SVG and HTML (no
//! clocks, no hash order, numbers printed with fixed precision), and the pages
//! load nothing from anywhere (inline SVG and CSS, no scripts).

pub mod chart;
pub mod data;
pub mod forest;
pub mod html;
