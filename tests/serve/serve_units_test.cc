// The parts of `crucible serve` below HTTP, in process: the text a stream
// may send (stop sequences across tokens, partial UTF-8), the request parser,
// the KV block pool, and the engine's continuous batching (results equal to
// a lone nn::Generator run; queue bound; cancellation and deadlines free
// slots and blocks). The HTTP side is tests/serve/serve_cli_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "nn/generator.h"
#include "nn/gpt.h"
#include "serve/api.h"
#include "serve/engine.h"
#include "serve/kv_pool.h"
#include "serve/text_stream.h"

namespace crucible {
namespace {

using namespace std::chrono_literals;

// Bytes as tokens: id b+1 is the byte b, id 0 ends the text.
class ByteTokenizer : public data::TextTokenizer {
 public:
  Kind kind() const override { return Kind::kByteLevelBpe; }
  std::vector<int32_t> encode(std::string_view t) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : t) ids.push_back(int32_t(c) + 1);
    return ids;
  }
  std::string decode(const int32_t* ids, size_t n) const override {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += char(ids[i] - 1);
    return s;
  }
  int vocab_size() const override { return 257; }
  int eos_id() const override { return 0; }
  uint64_t fingerprint() const override { return 1; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_ = "bytes";
};

// Feeds `text` one token at a time; returns what the stream sent.
std::string feed(serve::TextStream& ts, const ByteTokenizer& tok, const std::string& text) {
  std::string out;
  for (int32_t id : tok.encode(text)) out += ts.add({id});
  return out;
}

TEST(ServeTextStream, StopSequenceAcrossTokensEndsTheTextBeforeIt) {
  ByteTokenizer tok;
  serve::TextStream ts(tok, {"END", "\n\n"});
  std::string sent = feed(ts, tok, "hello EN");
  EXPECT_EQ(sent, "hello ");  // "EN" could begin "END": held back
  sent += ts.add(tok.encode("Dmore"));
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(sent + ts.finish(), "hello ");
  EXPECT_EQ(ts.ids().size(), 9u);  // up to the D that completed the stop
}

TEST(ServeTextStream, HeldBackTextIsReleasedWhenItCannotBeAStop) {
  ByteTokenizer tok;
  serve::TextStream ts(tok, {"END"});
  std::string sent = feed(ts, tok, "an ENd");
  EXPECT_EQ(sent, "an ENd");
  EXPECT_FALSE(ts.stopped());
  sent += feed(ts, tok, " E");
  EXPECT_EQ(sent + ts.finish(), "an ENd E");
}

TEST(ServeTextStream, PartialUtf8IsHeldUntilComplete) {
  ByteTokenizer tok;
  serve::TextStream ts(tok, {});
  const std::string euro = "\xE2\x82\xAC";
  EXPECT_EQ(feed(ts, tok, "a\xE2\x82"), "a");
  EXPECT_EQ(feed(ts, tok, "\xAC"), euro);
}

TEST(ServeTextStream, EndOfTextEndsTheText) {
  ByteTokenizer tok;
  serve::TextStream ts(tok, {});
  std::string sent = ts.add({2, 3, 0, 4});
  EXPECT_EQ(sent + ts.finish(), "\x01\x02");
  EXPECT_EQ(ts.ids(), (std::vector<int32_t>{2, 3, 0}));
}

serve::ParsedRequest parse(const std::string& body, int context = 64) {
  static ByteTokenizer tok;
  return serve::parse_completion(body, {&tok, "m", context});
}

TEST(ServeApi, ParsesOpenAiFields) {
  auto p = parse(R"({"model":"m","prompt":"ab","max_tokens":5,"temperature":0.5,"top_p":0.9,
                     "top_k":-1,"seed":-3,"stop":["x","y"],"stream":true,
                     "stream_options":{"include_usage":true},"n":1,"user":"u"})");
  ASSERT_FALSE(p.error) << p.error->message;
  const auto& r = p.request;
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{98, 99}));
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(*r.seed, uint64_t(-3));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.sampling.vocab, 257);
}

TEST(ServeApi, EmptyPromptStartsANewDocumentAndTokenIdsPass) {
  EXPECT_EQ(parse(R"({"prompt":""})").request.prompt, (std::vector<int32_t>{0}));
  EXPECT_EQ(parse(R"({"prompt":[5,6]})").request.prompt, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(parse(R"({"prompt":["ab"]})").request.prompt, (std::vector<int32_t>{98, 99}));
}

TEST(ServeApi, RefusalsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"x","stream_options":{"other":1}})", "stream_options.other"},
      {R"({"prompt":"x","echo":true})", "echo"},
      {R"({"prompt":"x","suffix":"s"})", "suffix"},
      {R"({"prompt":"x","presence_penalty":0.5})", "presence_penalty"},
      {R"({"prompt":"x","logit_bias":{"1":2}})", "logit_bias"},
      {R"({"prompt":"x","stop":["a","b","c","d","e"]})", "stop"},
      {R"({"prompt":[1,300]})", "prompt"},
      {R"({"prompt":"x","max_tokens":64})", "max_tokens"},  // 1 + 64 > 64
      {R"({"prompt":")" + std::string(64, 'a') + R"("})", "prompt"},
  };
  for (const auto& [body, param] : cases) {
    auto p = parse(body);
    ASSERT_TRUE(p.error) << body;
    EXPECT_EQ(p.error->status, 400) << body;
    EXPECT_EQ(p.error->param, param) << body << ": " << p.error->message;
  }
  EXPECT_FALSE(parse(R"({"prompt":"x","max_tokens":63})").error);
  auto other = parse(R"({"model":"gpt-4","prompt":"x"})");
  ASSERT_TRUE(other.error);
  EXPECT_EQ(other.error->status, 404);
}

TEST(ServeKvPool, TakesAndGivesBackWithoutFragmenting) {
  serve::KvBlockPool pool(10, 4, 8);
  EXPECT_EQ(pool.blocks_for(9), 3);
  std::vector<int32_t> a, b, c;
  ASSERT_TRUE(pool.take(3, a));
  ASSERT_TRUE(pool.take(6, b));
  EXPECT_FALSE(pool.take(2, c));  // only 1 left: nothing taken
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(pool.blocks_free(), 1);
  pool.give_back(a);
  EXPECT_TRUE(a.empty());
  ASSERT_TRUE(pool.take(4, c));  // a's 3 and the last one, wherever they are
  EXPECT_EQ(pool.blocks_free(), 0);
  pool.give_back(b);
  pool.give_back(c);
  EXPECT_EQ(pool.blocks_free(), 10);
}

const nn::GPTConfig kCfg{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/32, /*vocab_size=*/61,
                         /*seq_len=*/48};

// An engine's run() on a thread of the test's, stopped and joined at scope end.
struct Running {
  explicit Running(serve::Engine& e) : engine(e), thread([&e] { e.run(); }) {}
  ~Running() {
    engine.stop();
    thread.join();
  }
  serve::Engine& engine;
  std::thread thread;
};

class ServeEngine : public ::testing::Test {
 protected:
  ServeEngine() : gpt_(kCfg) {
    gpt_.init_weights(9);
    auto& P = gpt_.params();
    for (const auto& s : P.specs())
      if (s.name.ends_with("c_attn.weight"))
        for (size_t i = 0; i < s.numel; ++i) P.values()[s.offset + i] *= 6.0f;
  }
  std::shared_ptr<serve::Stream> request(int prompt_len, int max_tokens, float temperature, uint64_t seed) {
    auto s = std::make_shared<serve::Stream>();
    Rng rng(seed, 1);
    for (int i = 0; i < prompt_len; ++i) s->prompt.push_back(int32_t(1 + rng.next_u32() % 60));
    s->max_tokens = max_tokens;
    s->sampling = {temperature, 0, 0};
    s->seed = seed;
    s->arrival = std::chrono::steady_clock::now();
    s->deadline = s->arrival + 60s;
    return s;
  }
  // The tokens nn::generate gives the request alone (eos -1: never), with
  // the weights packed as the engine packs them (`crucible generate`'s way).
  std::vector<int32_t> alone(const serve::Stream& s) {
    nn::Generator gen(gpt_, /*constant_weights=*/true);
    Rng rng(s.seed, 0x6e6e);
    return nn::generate(gen, s.prompt, s.max_tokens, 0, s.sampling, rng);
  }
  static std::vector<int32_t> collect(serve::Stream& s, serve::Finish* why) {
    std::vector<int32_t> out;
    serve::Stream::Snapshot snap;
    do snap = s.wait(out.size(), out, std::chrono::steady_clock::now() + 10s);
    while (snap.finish == serve::Finish::none);
    *why = snap.finish;
    return out;
  }
  nn::GPT gpt_;
};

TEST_F(ServeEngine, BatchedRequestsGetTheirLoneTokens) {
  serve::EngineOptions o;
  o.max_batch = 6;  // 20 requests: most of them queue and join mid-flight
  o.step_tokens = 24;  // long prompts go in chunks
  o.block_tokens = 5;
  serve::Engine engine(gpt_, o, nullptr);
  Running run(engine);
  std::vector<std::shared_ptr<serve::Stream>> reqs;
  for (int i = 0; i < 20; ++i)
    reqs.push_back(request(1 + (i * 7) % 40, 1 + (i * 5) % 8, i % 3 ? 0.0f : 0.8f, 100 + i));
  for (auto& r : reqs) ASSERT_EQ(engine.submit(r), serve::Admit::queued);
  for (auto& r : reqs) {
    serve::Finish why;
    EXPECT_EQ(collect(*r, &why), alone(*r)) << "prompt " << r->prompt.size();
    EXPECT_EQ(why, serve::Finish::length);
  }
}

TEST_F(ServeEngine, QueueBoundCancellationAndDeadline) {
  serve::EngineOptions o;
  o.max_batch = 1;
  o.max_queue = 1;
  // A model slow enough (~0.3 ms a token) that 500 tokens outlast the test's
  // cancel by far.
  const nn::GPTConfig big{4, 4, 256, 61, 512};
  nn::GPT slow(big);
  slow.init_weights(9);
  serve::Engine engine(slow, o, nullptr);
  Running run(engine);
  auto running = request(4, 500, 0.0f, 1), queued = request(4, 3, 0.0f, 2), extra = request(4, 3, 0.0f, 3);
  queued->deadline = queued->arrival;  // already past: ends without running
  ASSERT_EQ(engine.submit(running), serve::Admit::queued);
  std::vector<int32_t> first;
  running->wait(0, first, std::chrono::steady_clock::now() + 10s);  // it runs
  ASSERT_EQ(engine.submit(queued), serve::Admit::queued);
  EXPECT_EQ(engine.submit(extra), serve::Admit::queue_full);
  running->cancel();
  serve::Finish why;
  auto got = collect(*running, &why);
  EXPECT_EQ(why, serve::Finish::cancelled);
  EXPECT_LT(got.size(), 500u);
  collect(*queued, &why);
  EXPECT_EQ(why, serve::Finish::deadline);
  // Both slots free again: a new request runs to its end.
  auto after = request(4, 3, 0.0f, 4);
  ASSERT_EQ(engine.submit(after), serve::Admit::queued);
  EXPECT_EQ(collect(*after, &why).size(), 3u);
  EXPECT_EQ(why, serve::Finish::length);
  engine.drain();
  EXPECT_EQ(engine.submit(request(4, 3, 0.0f, 5)), serve::Admit::draining);
}

}  // namespace
}  // namespace crucible
