//! End-to-end tests through the CLI: real Nix, real provider processes, real state files.

mod book;
mod cli;
mod disk_full;
mod faults;
mod flake;
mod gen;
mod headline;
mod hostile_cli;
mod hostile_providers;
mod imports;
mod lifecycle;
mod moves;
mod nixops4;
mod real_null;
mod remote;
mod remote_secrets;
mod sandbox;
mod saved_plans;
mod secrets;
mod secrets_property;
mod state_files;
mod team_faults;
mod weed;
