//! End-to-end tests through the CLI: real Nix, real provider processes, real state files.

mod book;
mod cli;
mod faults;
mod flake;
mod gen;
mod headline;
mod lifecycle;
mod real_null;
