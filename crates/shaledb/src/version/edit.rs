//! Version edits and their MANIFEST encoding. See docs/format/manifest.md.
