//! PNG output of `tlbkit plot`: the chart's SVG rasterised by `resvg`.
//!
//! Text needs a font, and tlbkit ships none: the system's fonts are loaded
//! (fontconfig's directories, e.g. /usr/share/fonts; DejaVu Sans is asked for
//! first). A system without fonts gets an error saying so, rather than a
//! picture without labels.

/// Returns `svg` drawn as PNG, at twice the SVG's size (sharp on high-density screens).
pub fn render(svg: &str) -> Result<Vec<u8>, String> {
    let mut db = resvg::usvg::fontdb::Database::new();
    db.load_system_fonts();
    if db.is_empty() {
        return Err("no fonts found on this system for the PNG's text (install one, e.g. Debian's \
                    fonts-dejavu-core), or write .svg instead"
            .into());
    }
    db.set_sans_serif_family("DejaVu Sans");
    let opt = resvg::usvg::Options { fontdb: std::sync::Arc::new(db), ..Default::default() };
    let tree = resvg::usvg::Tree::from_str(svg, &opt).map_err(|e| format!("cannot read the chart's SVG: {e}"))?;
    let size = tree.size().to_int_size().scale_by(2.0).ok_or("chart too large for PNG")?;
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("chart too large for PNG")?;
    resvg::render(&tree, resvg::tiny_skia::Transform::from_scale(2.0, 2.0), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| format!("cannot encode PNG: {e}"))
}
