// C4 line and page filters (data/quality.h, c4_filter).
#include <gtest/gtest.h>

#include <string>

#include "data/quality.h"
#include "support/verdict_checks.h"

namespace crucible::data {
namespace {

// ---- C4 ----

TEST(C4, LineRules) {
  std::string text =
      "The river flows past the old mill.\n"             // kept
      "Too short.\n"                                     // < 5 words
      "This line has no terminal punctuation\n"          // no end mark
      "This line trails off into an ellipsis...\n"       // "..." is not an end mark
      "Please enable JavaScript in your browser.\n"      // javascript
      "Read our Privacy Policy before you start.\n"      // policy
      "This site uses cookies to improve things.\n"      // policy
      "She asked whether they would come back?\n"        // kept
      "He said it was \u201Cthe best day ever.\u201D\n"  // kept (closing quote)
      "It was called \u2018the old road\u2019\n"         // kept (’)
      "They shouted that the flood was coming!";         // kept
  size_t removed = 0;
  const Verdict v = c4_filter(text, {}, &removed);
  expect_kept(v);
  EXPECT_EQ(removed, 6u);
  EXPECT_EQ(text,
            "The river flows past the old mill.\n"
            "She asked whether they would come back?\n"
            "He said it was \u201Cthe best day ever.\u201D\n"
            "It was called \u2018the old road\u2019\n"
            "They shouted that the flood was coming!");
}

TEST(C4, EachPolicySubstring) {
  for (const char* pol : {"terms of use", "privacy policy", "cookie policy", "uses cookies",
                          "use of cookies", "use cookies"}) {
    std::string text = std::string("A line about the ") + pol + " of this page.\n" +
                       "One good line stays here. Two sentences. Three of them.";
    size_t removed = 0;
    expect_kept(c4_filter(text, {}, &removed));
    EXPECT_EQ(removed, 1u) << pol;
    EXPECT_EQ(text, "One good line stays here. Two sentences. Three of them.");
  }
}

TEST(C4, LineRulesSwitchOff) {
  C4Params p;
  p.min_words_per_line = 0;
  p.terminal_punct = false;
  p.drop_javascript = false;
  p.drop_policy = false;
  p.min_sentences = 0;
  std::string text = "Short\nno end mark here at all\nJavaScript use cookies";
  const std::string before = text;
  size_t removed = 7;
  expect_kept(c4_filter(text, p, &removed));
  EXPECT_EQ(removed, 0u);
  EXPECT_EQ(text, before);
}

TEST(C4, EmptyPage) {
  std::string text = "too short.\nalso short!\n";
  size_t removed = 0;
  const Verdict v = c4_filter(text, {}, &removed);
  expect_removed(v, "c4.empty");
  EXPECT_EQ(removed, 2u);
  std::string empty;
  expect_removed(c4_filter(empty, {}), "c4.empty");
}

TEST(C4, MinSentences) {
  std::string three =
      "The river rose in spring. The mill wheel turned faster. Children watched it.";
  expect_kept(c4_filter(three, {}));
  std::string two = "The river rose in spring. The mill wheel turned faster and faster.";
  const Verdict v = c4_filter(two, {});
  expect_removed(v, "c4.min_sentences");
  EXPECT_EQ(v.value, 2);
  EXPECT_EQ(v.threshold, 3);
  // Sentence ends need whitespace or the end of the line after them: 3.14 is one
  // sentence; every kept line counts at least one.
  std::string pi = "The value of pi is about 3.14 in most books\u201D\nA second line of text here!";
  EXPECT_EQ(c4_filter(pi, {}).value, 2);
  C4Params off;
  off.min_sentences = 0;
  std::string one = "Only one sentence stands on this page.";
  expect_kept(c4_filter(one, off));
}

TEST(C4, LoremIpsum) {
  std::string text = "Lorem Ipsum dolor sit amet, consectetur. The mill turned. The river rose.";
  expect_removed(c4_filter(text, {}), "c4.lorem_ipsum");
  // In a line the line rules drop, it does not count.
  std::string dropped = "lorem ipsum\nThe river rose in spring. The mill turned. Kids watched.";
  expect_kept(c4_filter(dropped, {}));
  C4Params off;
  off.drop_lorem_ipsum = false;
  std::string again = "Lorem Ipsum dolor sit amet, consectetur. The mill turned. The river rose.";
  expect_kept(c4_filter(again, off));
}

TEST(C4, CurlyBracket) {
  std::string text = "The config uses {braces} in this line. The mill turned. The river rose.";
  expect_removed(c4_filter(text, {}), "c4.curly_bracket");
  std::string dropped = "function f() {\nThe river rose in spring. The mill turned. Kids watched.";
  size_t removed = 0;
  expect_kept(c4_filter(dropped, {}, &removed));
  EXPECT_EQ(removed, 1u);
  C4Params off;
  off.drop_curly_bracket = false;
  std::string again = "The config uses {braces} in this line. The mill turned. The river rose.";
  expect_kept(c4_filter(again, off));
}

TEST(C4, PageRulesInOrder) {
  // Lorem ipsum and a brace on a page with too few sentences: min_sentences first.
  std::string text = "Lorem ipsum {dolor} sit amet today.";
  expect_removed(c4_filter(text, {}), "c4.min_sentences");
  std::string both = "Lorem ipsum {dolor} sit amet today. One. Two. Three.";
  expect_removed(c4_filter(both, {}), "c4.lorem_ipsum");
}


}  // namespace
}  // namespace crucible::data
