mod socket;

mod timeout;
pub use timeout::*;
