//! `nivis why ADDR[.ATTR]`: where a resource or attribute value comes from.

use super::super::args::WhyArgs;
use super::super::fail;

/// Runs `nivis why`.
pub fn why(args: &WhyArgs) -> i32 {
    fail(&format!("nivis why {}: not implemented yet", args.address))
}
