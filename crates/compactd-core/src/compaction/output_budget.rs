//! Output budgets of the summarization calls (spec §6.3). The prompts themselves are written by
//! [`crate::transcript::prompt`].

/// Output budget of the history summary: `floor(0.8 × reserveTokens)`.
pub fn history_max_tokens(reserve_tokens: u64) -> u64 {
    reserve_tokens * 8 / 10
}

/// Output budget of the turn-prefix summary: `floor(0.5 × reserveTokens)`.
pub fn turn_prefix_max_tokens(reserve_tokens: u64) -> u64 {
    reserve_tokens / 2
}

/// Output budget of a branch summary.
pub const BRANCH_MAX_TOKENS: u64 = 2048;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_follow_the_reference() {
        assert_eq!(history_max_tokens(16_384), 13_107);
        assert_eq!(turn_prefix_max_tokens(16_384), 8_192);
        assert_eq!(history_max_tokens(10_000), 8_000);
    }
}
