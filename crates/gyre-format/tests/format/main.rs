//! Integration tests of gyre-format: the per-line checks of gyre/1 records.

mod trained;
