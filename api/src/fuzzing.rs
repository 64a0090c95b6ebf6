//! The proptest settings shared by the property tests (fuzzers) of the pure
//! parsers: a fixed case budget and a fixed seed, so CI runs the same cases
//! every time and a failure reproduces exactly.
//!
//! `PROPTEST_CASES` changes the budget and `PROPTEST_RNG_SEED` the seed (to
//! explore beyond the cases CI runs). Failures are not persisted to
//! `proptest-regressions` files: the fixed seed replays them, and each bug a
//! fuzzer found has a plain unit test of its own next to its fix.

use proptest::test_runner::{Config, RngSeed};

/// The seed CI runs with (any fixed number; changing it changes the cases).
const SEED: u64 = 0x0_0022_f022;

/// `default_cases` cases (or `PROPTEST_CASES`), the fixed seed (or
/// `PROPTEST_RNG_SEED`), no persistence files.
pub fn config(default_cases: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    if config.rng_seed == RngSeed::Random {
        config.rng_seed = RngSeed::Fixed(SEED);
    }
    config.failure_persistence = None;
    config
}
