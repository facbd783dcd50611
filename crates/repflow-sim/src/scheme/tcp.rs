//! TCP: NewReno over DropTail ports, one connection per flow — the baseline every other
//! scheme is measured against.

use super::unit::{Context, Parts, Scheme};
use serde::{Deserialize, Serialize};

/// TCP takes no parameters of its own (the `[tcp]` table configures the protocol).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TcpScheme {}

impl Scheme for TcpScheme {
    fn build(&self, ctx: &Context) -> Parts {
        Parts::plain(ctx)
    }
}
