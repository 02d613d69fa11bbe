//! ChatML turn structure from Qwen3 ids: assistant turns (content and the `<|im_end|>` closing
//! them) against everything else.

use gyre_text::TokenText;
use gyre_text::turns::ChatMl;

#[test]
fn qwen3_turns_mark_the_assistant_content_and_its_end() {
    let text = TokenText::qwen3().unwrap();
    let chat = ChatMl::new(&text).unwrap();
    let part = |s: &str| text.encode(s).unwrap();
    let lead = part("Hello");
    let user = part("<|im_start|>user\nWhat is 2+2?<|im_end|>\n");
    let header = part("<|im_start|>assistant\n");
    let answer = part("<think>\nAdd.\n</think>\n\n4<|im_end|>");
    let between = part("\n");
    let tool = part("<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>");
    let ids: Vec<u32> = [&lead, &user, &header, &answer, &between, &tool]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    let got = chat.assistant(&ids);
    let mut want: Vec<Option<bool>> = vec![None; lead.len()];
    want.extend(vec![Some(false); user.len() + header.len()]);
    want.extend(vec![Some(true); answer.len()]);
    want.extend(vec![Some(false); between.len() + tool.len()]);
    assert_eq!(got, want);
    // A vocabulary without ChatML's markers has no such structure.
    assert!(ChatMl::new(&TokenText::none()).is_none());
}
