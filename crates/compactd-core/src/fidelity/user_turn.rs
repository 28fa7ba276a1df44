//! A user turn as the facts read it: the person's words, or what an agent or a harness put there
//! (its injected text, a command's output it sends as a user turn).

use super::facts::{
    Facts, Reading, agents_prompt, carries_a_summary, clip, code_spans, is_slash_command,
};
use super::standing;
use crate::transcript::{Message, Role, ToolCall};

impl Facts {
    pub(super) fn user_turn(&mut self, messages: &[Message], index: usize, reading: &mut Reading) {
        let message = &messages[index];
        if let Some(command) = message.user_command() {
            // A shell command the user ran (`!cmd`): its command and errors count.
            self.collect_errors(index, &message.text, Some(command));
            self.commands.push(command);
            return;
        }
        // Claude Code's continuation (its earlier summary, in a text dialect) is no request;
        // what follows it in the same turn is read as any turn.
        let text = match crate::transcript::continuation::continuation_end(&message.text) {
            Some(end) => &message.text[end..],
            None => &message.text,
        };
        // A text dialect (pi's serialization of another agent's session) keeps what the agent
        // wrote into the user's turn in it: only the user's words are theirs.
        let words = self.agents_text_taken_out(text, index);
        let text = words.trim();
        if text.is_empty()
            || is_slash_command(text)
            || carries_a_summary(text)
            || agents_prompt(text)
        {
            return;
        }
        // A harness that sends what a command printed as a user turn (mini-swe-agent's
        // `<returncode>`/`<output>`, SWE-agent's terminal): the command's result, once the task
        // is given. Once the harness has shown its pattern, any turn after an answer that ends in
        // a command is that command's output (a final `git diff`).
        let before = index.checked_sub(1).map(|before| &messages[before]);
        let answers_an_action = before.is_some_and(|b| b.role == Role::Assistant);
        let after_a_command = reading.harness
            && before.is_some_and(|b| b.calls.is_empty() && last_fenced_block(&b.text).is_some());
        if !self.requests.is_empty()
            && answers_an_action
            && (after_a_command || crate::transcript::agent_text::is_observation(text))
        {
            reading.harness = true;
            let command = reading.pending.pop_front().flatten();
            self.collect_errors(index, text, command.as_deref());
            return;
        }
        self.requests.push(text.to_owned());
        // The ledger and the rules are the user's own words: a rule-like line of pasted output
        // is not.
        let words = super::user_words::of(text);
        let items = super::ledger::items_of_words(&words);
        self.latest_in_ledger = items.len();
        self.ledger.extend(items);
        for (statement, sentence) in standing::of_turn(&words) {
            self.add_standing(statement, clip(sentence, 240));
        }
        for span in code_spans(text) {
            self.identifiers.push(span);
            self.user_identifiers.push(span);
        }
    }

    /// The user's own words of a user turn's text; the agent's text in it read as what it is
    /// (a pasted rules file's rules, a command the user ran, a call replayed and its result).
    fn agents_text_taken_out(&mut self, text: &str, index: usize) -> String {
        use crate::transcript::agent_text::{Piece, command_of, is_local_command, pieces};
        let pieces = pieces(text);
        if pieces.iter().all(|p| matches!(p, Piece::User(_))) {
            return text.to_owned();
        }
        let mut words: Vec<String> = Vec::new();
        // A custom command the user ran is their words (its expansion is the agent's).
        if !is_local_command(&pieces)
            && let Some(command) = command_of(&pieces)
        {
            words.push(command);
        }
        for piece in pieces {
            match piece {
                Piece::User(user) => words.push(user.to_owned()),
                Piece::Agent(agent) => {
                    for (statement, sentence) in standing::of_pasted_file(agent) {
                        self.add_standing(statement, clip(sentence, 240));
                    }
                }
                Piece::Command { command, output } => {
                    self.collect_errors(index, &output, Some(command));
                    self.commands.push(command);
                }
                Piece::Call { tool, arguments } => {
                    self.add_call(&ToolCall::from_object(tool, &arguments));
                }
                Piece::Result { tool, text } => self.collect_errors(index, text, Some(tool)),
            }
        }
        words.join("\n")
    }
}

/// The body of the fenced block a text ends with (only whitespace after it).
pub(super) fn last_fenced_block(text: &str) -> Option<String> {
    let body = text.trim_end().strip_suffix("```")?;
    let open = body.rfind("```")?;
    let block = &body[open + 3..];
    // The fence's info string (`bash`, `mswea_bash_command`) is its first line.
    let (_, script) = block.split_once('\n')?;
    let script = script.trim();
    (!script.is_empty()).then(|| script.to_owned())
}
