//! Table (SST) files: blocks, filters, index, properties, footer. See docs/format/sstable.md.
