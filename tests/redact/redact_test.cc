// Redaction rules and the redactor (redact/): every built-in rule on a planted secret,
// text around it kept, no redaction of look-alikes, JSON-escaped secrets, literals from
// the environment, rules files and their errors, and the token-id rule for model calls.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "redact/redactor.h"
#include "redact/rules.h"
#include "testkit/temp_dir.h"

namespace trace::redact {
namespace {

Redactor Defaults() {
  auto r = Redactor::Create(RuleSet::Defaults());
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(*r);
}

std::string Redacted(const Redactor& r, std::string text,
                     std::map<std::string, int>* hits = nullptr) {
  r.RedactText(&text, hits);
  return text;
}

struct Planted {
  const char* rule;
  std::string secret;   // must disappear
  std::string context;  // text around it, with {} where the secret goes
};

// One planted secret per built-in rule, in the context it typically appears in.
std::vector<Planted> PlantedSecrets() {
  return {
      {"private-key",
       "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9x1u2hQ\nZy8Tq3p0w==\n-----END RSA "
       "PRIVATE KEY-----",
       "key file:\n{}\nend"},
      {"private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
       "truncated: {}"},
      {"anthropic-api-key", "sk-ant-api03-Xk2f9Qm3Lp8Rz1Tv6Wy0Bn4Hc7Jd5Gs", "key={} ok"},
      {"sk-api-key", "sk-proj-4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2", "OPENAI_API_KEY {} ."},
      {"sk-api-key", "sk-0123456789abcdef0123456789abcdef", "deepseek {}"},
      {"aws-access-key-id", "AKIAIOSFODNN7EXAMPLE", "id {} here"},
      {"aws-secret-access-key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
       "aws_secret_access_key = {}\n"},
      {"google-api-key", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "maps {}."},
      {"github-token", "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "token: {}"},
      {"github-token",
       "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS",
       "{}"},
      {"gitlab-token", "glpat-xY7zQ2wE9rT4uI1oP6aS", "{}"},
      {"slack-token", "xoxb-1234567890-0987654321-AbCdEfGhIjKl", "slack {}"},
      {"stripe-secret-key", "sk_live_51H8a2bC3d4E5f6G7h8I9j0K", "stripe {}"},
      {"huggingface-token", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "HF {}"},
      {"groq-api-key", "gsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGh", "{}"},
      {"xai-api-key", "xai-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz01", "{}"},
      {"jwt",
       "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_"
       "XgL0n3I9PlFUP0THsR8U",
       "cookie={};"},
      {"trace-run-token", "trace-0123456789abcdef0123456789abcdef", "my key is {}!"},
      {"bearer-token", "Zm9vYmFyYmF6cXV4MTIzNDU2", "Authorization: Bearer {}"},
      {"basic-auth", "dXNlcjpodW50ZXIyaHVudGVyMg==", "Authorization: Basic {}"},
      {"url-password", "hunter2-pg-pass", "postgres://app:{}@db.internal:5432/app"},
      {"secret-assignment", "correct-horse-battery", "DB_PASSWORD={}\n"},
      {"secret-assignment", "s3cr3tV4lue", R"({"client_secret": "{}"})"},
  };
}

std::string Fill(const std::string& context, const std::string& secret) {
  std::string out = context;
  out.replace(out.find("{}"), 2, secret);
  return out;
}

TEST(RedactRulesTest, EveryBuiltInRuleRedactsItsPlantedSecretAndKeepsTheRest) {
  Redactor r = Defaults();
  for (const Planted& p : PlantedSecrets()) {
    std::string text = Fill(p.context, p.secret);
    std::map<std::string, int> hits;
    std::string out = Redacted(r, text, &hits);
    EXPECT_EQ(out.find(p.secret), std::string::npos) << p.rule << ": " << out;
    EXPECT_EQ(hits[p.rule], 1) << p.rule << " did not match in: " << text << " -> " << out;
    EXPECT_NE(out.find(std::string("[REDACTED:") + p.rule + "]"), std::string::npos) << out;
    // The words around the secret survive.
    std::string before = p.context.substr(0, p.context.find("{}"));
    EXPECT_EQ(out.rfind(before, 0), 0u) << p.rule << ": " << out;
  }
}

TEST(RedactRulesTest, LookAlikesAreLeftAlone) {
  Redactor r = Defaults();
  for (std::string text : {
           std::string(R"({"max_tokens": 100000, "prompt_tokens": 123456789, "top_k": 40})"),
           std::string("the bearer of bad news"),
           std::string("task-management-for-small-teams and risk-assessment-frameworks"),
           std::string("sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
           std::string("run 01M8Q2WE338ETWQC3S3Z9PC81K at http://127.0.0.1:8080/v1"),
           std::string("password is required"),
           std::string("The sk-learn estimator"),
       }) {
    EXPECT_EQ(Redacted(r, text), text);
  }
}

TEST(RedactRulesTest, RedactingTwiceChangesNothingMoreAndOverlapsMerge) {
  Redactor r = Defaults();
  std::string text =
      "Authorization: Bearer sk-proj-4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2 and "
      "password=sk-ant-api03-Xk2f9Qm3Lp8Rz1Tv6Wy0Bn4Hc7Jd5Gs";
  std::map<std::string, int> hits;
  std::string once = Redacted(r, text, &hits);
  // The bearer token is also an sk- key: same range, the earlier-listed (more specific)
  // rule names it.
  EXPECT_EQ(once,
            "Authorization: Bearer [REDACTED:sk-api-key] and password=[REDACTED:anthropic-api-key]")
      << once;
  // Ranges that overlap in part merge into one replacement, so no tail of either survives.
  RuleSet two = RuleSet::Empty();
  ASSERT_TRUE(two.AddPattern("one", "abc-[0-9]+").ok());
  ASSERT_TRUE(two.AddPattern("two", "[0-9]+-xyz").ok());
  auto overlapping = Redactor::Create(two);
  ASSERT_TRUE(overlapping.ok());
  std::map<std::string, int> merged_hits;
  EXPECT_EQ(Redacted(*overlapping, "<abc-123-xyz>", &merged_hits), "<[REDACTED:one]>");
  EXPECT_EQ(merged_hits, (std::map<std::string, int>{{"one", 1}}));
  EXPECT_EQ(Redacted(r, once), once);
  std::map<std::string, int> again;
  std::string twice = once;
  EXPECT_FALSE(r.RedactText(&twice, &again));
  EXPECT_TRUE(again.empty());
}

TEST(RedactRulesTest, JsonEscapedSecretsAreFoundAndTheDocumentStillParses) {
  Redactor r = Defaults();
  // "sk-proj-..." with its letters JSON-escaped, and a PEM block with \n escapes.
  std::string doc =
      R"({"messages":[{"role":"user","content":"use \u0073k-proj-4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2 now"},)"
      R"({"role":"tool","content":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"}],"temperature":0.5})";
  std::map<std::string, int> hits;
  ASSERT_TRUE(r.RedactJsonText(&doc, &hits));
  auto j = nlohmann::json::parse(doc);  // still JSON
  std::string user = j["messages"][0]["content"];
  EXPECT_EQ(user, "use [REDACTED:sk-api-key] now");
  EXPECT_EQ(j["messages"][1]["content"], "[REDACTED:private-key]\n");
  EXPECT_EQ(j["temperature"], 0.5);
  EXPECT_EQ(hits["sk-api-key"], 1);
  EXPECT_EQ(hits["private-key"], 1);
}

// A match that runs from one JSON string into another (a key block whose END line is in a
// later message, or one cut off, which runs to the end of the text), or that ends inside
// an escape sequence, replaces only string content: the document stays valid JSON and the
// secret is gone. (Found by tests/fuzz/redact_fuzz.cc: the document used to break.)
TEST(RedactRulesTest, MatchesAcrossJsonStringsKeepTheDocumentValid) {
  Redactor r = Defaults();
  const std::string body = "MIIEowIBAAKCAQEA7bq9x1u2hQZy8Tq3p0w";
  for (std::string doc : {
           R"({"a": "-----BEGIN RSA PRIVATE KEY-----\n)" + body +
               R"(", "b": [1, {"c": "x-----END RSA PRIVATE KEY-----"}], "n": 7})",
           R"({"a": "cut off: -----BEGIN PRIVATE KEY-----\n)" + body +
               R"(", "b": ["tail"], "n": 7})",
       }) {
    SCOPED_TRACE(doc);
    ASSERT_TRUE(r.RedactJsonText(&doc, nullptr));
    auto j = nlohmann::json::parse(doc, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << doc;
    EXPECT_EQ(j["n"], 7);
    EXPECT_EQ(doc.find(body), std::string::npos) << doc;
    std::string again = doc;
    EXPECT_FALSE(r.RedactJsonText(&again, nullptr)) << again;  // idempotent
  }
  // A literal secret that starts inside an escape sequence ("\n" + "secretvalue1"): the
  // whole escape goes with it.
  RuleSet rules = RuleSet::Empty();
  rules.AddLiteral("env:X", "nsecretvalue1");
  auto literal = Redactor::Create(rules);
  ASSERT_TRUE(literal.ok());
  std::string doc = R"({"s": "line\nsecretvalue1 end", "n": 7})";
  ASSERT_TRUE(literal->RedactJsonText(&doc, nullptr));
  auto j = nlohmann::json::parse(doc, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << doc;
  EXPECT_EQ(j["s"], "line[REDACTED:env:X] end");
}

// A rule that matches its own marker ("user:[REDACTED:url-password]@" is still a URL with a
// password) leaves it as it is: redacting again reports no change and keeps the JSON
// document's formatting. (Found by tests/fuzz/redact_fuzz.cc: the second pass rewrote it.)
TEST(RedactRulesTest, ARuleMatchingItsOwnMarkerIsNoChange) {
  Redactor r = Defaults();
  std::string text = "db at postgres://user:pa55word@db.internal:5432/x";
  ASSERT_TRUE(r.RedactText(&text, nullptr));
  const std::string once = text;
  std::map<std::string, int> hits;
  EXPECT_FALSE(r.RedactText(&text, &hits)) << text;
  EXPECT_EQ(text, once);
  EXPECT_TRUE(hits.empty());

  std::string doc = R"({"url": "postgres://user:pa55word@db:5432/x", "n": [1, 2]})";
  ASSERT_TRUE(r.RedactJsonText(&doc, nullptr));
  const std::string doc_once = doc;
  EXPECT_FALSE(r.RedactJsonText(&doc, nullptr)) << doc;
  EXPECT_EQ(doc, doc_once);
}

// nlohmann's parser stops at a NUL byte: a JSON document followed by a NUL and a secret
// must be scanned as text, not taken for the document before the NUL. (Found by
// tests/fuzz/redact_fuzz.cc under libFuzzer: the secret after the NUL survived.)
TEST(RedactRulesTest, TextAfterANulByteIsRedacted) {
  Redactor r = Defaults();
  std::string doc =
      R"({"a": "x"})" + std::string(1, '\0') + " sk-proj-4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2";
  ASSERT_TRUE(r.RedactJsonText(&doc, nullptr));
  EXPECT_EQ(doc.find("4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2"), std::string::npos) << doc;
}

// A document that is JSON only once a secret is replaced (the secret held a control
// byte) gets the JSON pass too: its escaped secrets go in the first redaction, not the
// second. (Found by tests/fuzz/redact_fuzz.cc under libFuzzer.)
TEST(RedactRulesTest, TextThatBecomesJsonIsRedactedAsJson) {
  Redactor r = Defaults();
  std::string doc =
      R"({"key": "-----BEGIN PRIVATE KEY-----)" + std::string(1, '\x11') +
      R"(MIIEow-----END PRIVATE KEY-----", "note": "\u0073k-ant-api03-abcdefghijklmnopqrstuvwxyz"})";
  ASSERT_TRUE(r.RedactJsonText(&doc, nullptr));
  auto j = nlohmann::json::parse(doc, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << doc;
  EXPECT_EQ(j["note"], "[REDACTED:anthropic-api-key]") << doc;
  const std::string once = doc;
  EXPECT_FALSE(r.RedactJsonText(&doc, nullptr)) << doc;
  EXPECT_EQ(doc, once);
}

// A marker can complete a rule's context: after "[REDACTED:aws-secret-access-key]" the
// next 40 key-like characters match the AWS rule. One redaction takes them too, so a second
// finds nothing. (Found by tests/fuzz/redact_fuzz.cc under libFuzzer.)
TEST(RedactRulesTest, AMarkerThatCompletesARuleIsRedactedInTheSamePass) {
  Redactor r = Defaults();
  const std::string second = "GITHUBdefghijklmnop1jklmnopqrstuvwxyz012";
  for (bool json : {false, true}) {
    std::string text =
        json ? R"({"env": "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEYAB )" +
                   second + R"("})"
             : "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEYAB " + second;
    SCOPED_TRACE(text);
    ASSERT_TRUE(json ? r.RedactJsonText(&text, nullptr) : r.RedactText(&text, nullptr));
    EXPECT_EQ(text.find(second), std::string::npos) << text;
    const std::string once = text;
    EXPECT_FALSE(json ? r.RedactJsonText(&text, nullptr) : r.RedactText(&text, nullptr)) << text;
    EXPECT_EQ(text, once);
  }
}

// A rule that matches characters of its own marker ("[REDACTED:x]" holds 'x' and ':') does
// not redact inside the markers an earlier pass wrote: before, every pass replaced each of
// those characters with a new marker, and the text grew by a factor of about the marker's
// length per pass (export_inputs_fuzz hung on such a rules file).
TEST(RedactRulesTest, ARuleMatchingItsOwnMarkerRedactsOnceAndStops) {
  RuleSet rules = RuleSet::Empty();
  ASSERT_TRUE(rules.AddPattern("x", "[x:.]").ok());
  auto r = Redactor::Create(rules);
  ASSERT_TRUE(r.ok());
  for (bool json : {false, true}) {
    std::string text = json ? R"({"a": "x.x"})" : "x.x";
    ASSERT_TRUE(json ? r->RedactJsonText(&text, nullptr) : r->RedactText(&text, nullptr));
    EXPECT_EQ(text, json ? R"({"a": "[REDACTED:x][REDACTED:x][REDACTED:x]"})"
                         : "[REDACTED:x][REDACTED:x][REDACTED:x]");
    EXPECT_FALSE(json ? r->RedactJsonText(&text, nullptr) : r->RedactText(&text, nullptr));
  }
}

// Only a whole marker of a rule in force is left alone. Before, "[REDACTED:" and anything up
// to the next ']' counted as a marker, so text that merely looked like one hid the secret
// inside it from every rule (redact_fuzz: a run's own API key survived an export).
TEST(RedactRulesTest, ASecretInsideTextThatLooksLikeAMarkerIsRedacted) {
  Redactor r = Defaults();
  const std::string key = "trace-0123456789abcdef0123456789abcdef";
  for (const std::string& look_alike :
       {"[REDACTED:le\", oerrct horse " + key + " _to]", "[REDACTED: " + key + " ]",
        "[REDACTED:trace-run-token " + key + "]", "[REDACTED:" + key + "]"}) {
    for (bool json : {false, true}) {
      std::string text = json ? nlohmann::json({{"a", look_alike}}).dump() : look_alike;
      SCOPED_TRACE(text);
      ASSERT_TRUE(json ? r.RedactJsonText(&text, nullptr) : r.RedactText(&text, nullptr));
      EXPECT_EQ(text.find("0123456789abcdef0123456789abcdef"), std::string::npos) << text;
      if (json) {
        EXPECT_TRUE(nlohmann::json::accept(text)) << text;
      }
      const std::string once = text;
      EXPECT_FALSE(json ? r.RedactJsonText(&text, nullptr) : r.RedactText(&text, nullptr));
      EXPECT_EQ(text, once);
    }
  }
  // A real marker is still left as it is, in text and inside a JSON string.
  std::string marker = "x [REDACTED:trace-run-token] y";
  EXPECT_FALSE(r.RedactText(&marker, nullptr));
  std::string doc = R"({"a": "[REDACTED:trace-run-token]"})";
  EXPECT_FALSE(r.RedactJsonText(&doc, nullptr));
}

// A rule whose matches straddle two markers ("Y][") breaks them, and the broken markers'
// capitals are matches again: without a bound every second pass multiplied the text by
// about eleven (export_inputs_fuzz: a 450-byte rules file took 26 s and 1 GB). A text that
// would grow past every byte becoming the longest marker is replaced whole by one marker.
TEST(RedactRulesTest, RulesThatGrowTheTextPassAfterPassReplaceItWhole) {
  RuleSet rules = RuleSet::Empty();
  ASSERT_TRUE(rules.AddPattern("KEY", R"(Y\]\[|[A-Z])").ok());
  auto r = Redactor::Create(rules);
  ASSERT_TRUE(r.ok());
  const std::string marker = "[REDACTED:KEY]";
  std::map<std::string, int> hits;
  std::string text = "xAB";
  ASSERT_TRUE(r->RedactText(&text, &hits));
  EXPECT_EQ(text, marker);
  EXPECT_EQ(hits, (std::map<std::string, int>{{"KEY", 1}}));
  EXPECT_FALSE(r->RedactText(&text, nullptr));  // redacting twice changes nothing

  std::string doc = R"({"a": "xAB", "b": [1, "CD"]})";
  hits.clear();
  ASSERT_TRUE(r->RedactJsonText(&doc, &hits));
  EXPECT_LE(doc.size(), (std::string(R"({"a": "xAB", "b": [1, "CD"]})").size() + 1) * 16) << doc;
  EXPECT_TRUE(nlohmann::json::accept(doc)) << doc;
  EXPECT_EQ(doc.find("AB"), std::string::npos) << doc;
  EXPECT_EQ(doc.find("CD"), std::string::npos) << doc;
  EXPECT_FALSE(r->RedactJsonText(&doc, nullptr)) << doc;

  // A rule that matches single bytes still marks each one: that growth is the bound's own.
  RuleSet bytes = RuleSet::Empty();
  ASSERT_TRUE(bytes.AddPattern("KEY", "[A-Z]").ok());
  auto each = Redactor::Create(bytes);
  ASSERT_TRUE(each.ok());
  text = "xAB";
  ASSERT_TRUE(each->RedactText(&text, nullptr));
  EXPECT_EQ(text, "x" + marker + marker);
}

// A chain of contexts, each marker completing the next match, longer than the passes allow
// (redact_fuzz built one of AWS keys, each after the marker of the one before): the text, or
// the JSON string holding it, is replaced whole, so a second redaction finds nothing. A
// shorter chain settles one link a pass.
TEST(RedactRulesTest, AChainLongerThanThePassesIsReplacedWhole) {
  RuleSet rules = RuleSet::Empty();
  ASSERT_TRUE(rules.AddPattern("X", R"((?<=\])a)").ok());  // an 'a' right after a ']'
  auto r = Redactor::Create(rules);
  ASSERT_TRUE(r.ok());
  std::map<std::string, int> hits;
  std::string text = "]" + std::string(5, 'a');
  ASSERT_TRUE(r->RedactText(&text, &hits));
  std::string chain = "]";
  for (int i = 0; i < 5; ++i) chain += "[REDACTED:X]";
  EXPECT_EQ(text, chain);
  EXPECT_EQ(hits, (std::map<std::string, int>{{"X", 5}}));

  text = "]" + std::string(12, 'a');
  hits.clear();
  ASSERT_TRUE(r->RedactText(&text, &hits));
  EXPECT_EQ(text, "[REDACTED:X]");
  EXPECT_EQ(hits, (std::map<std::string, int>{{"X", 1}}));
  EXPECT_FALSE(r->RedactText(&text, nullptr));

  std::string doc = R"({"k": "])" + std::string(12, 'a') + R"(", "n": 1})";
  ASSERT_TRUE(r->RedactJsonText(&doc, nullptr));
  EXPECT_EQ(doc, R"({"k": "[REDACTED:X]", "n": 1})");
  EXPECT_FALSE(r->RedactJsonText(&doc, nullptr)) << doc;
}

// Nesting too deep to walk safely is scanned as text: no stack overflow, the raw secret
// still found.
TEST(RedactRulesTest, DeeplyNestedJsonIsScannedAsText) {
  Redactor r = Defaults();
  std::string doc = std::string(100000, '[') + R"("sk-proj-4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2")" +
                    std::string(100000, ']');
  ASSERT_TRUE(r.RedactJsonText(&doc, nullptr));
  EXPECT_EQ(doc.find("4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2"), std::string::npos);
}

// The strings of a JSON text are redacted decoded on the text itself, not on a parsed
// document: an object that repeats a key (a parsed document keeps only the last member)
// has each member scanned, keys included; a secret escaped at any depth is found; what
// did not change stays byte for byte. (Found by tests/fuzz/redact_fuzz.cc under
// libFuzzer: the run's key, in a key of a member that a later "b" replaced, survived.)
TEST(RedactRulesTest, EveryStringOfAJsonTextIsRedactedInPlace) {
  Redactor r = Defaults();
  const std::string digits = "4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2";
  const std::string escaped = R"(\u0073k-proj-)" + digits;  // "sk-proj-..." escaped
  for (const std::string& doc : {
           R"({"b": [1, {"c sk-proj-)" + digits + R"( ": "x"}], "b": [0]})",
           R"({"a": ")" + escaped + R"(", "a": 1})",
           R"({"a": {")" + escaped + R"(": 1}, "a": 2})",
           std::string(100000, '[') + '"' + escaped + '"' + std::string(100000, ']'),
       }) {
    SCOPED_TRACE(doc.substr(0, 80));
    std::string text = doc;
    std::map<std::string, int> hits;
    ASSERT_TRUE(r.RedactJsonText(&text, &hits));
    EXPECT_EQ(text.find(digits), std::string::npos) << text.substr(0, 200);
    EXPECT_TRUE(nlohmann::json::accept(text)) << text.substr(0, 200);
    EXPECT_EQ(hits, (std::map<std::string, int>{{"sk-api-key", 1}}));
    const std::string once = text;
    EXPECT_FALSE(r.RedactJsonText(&text, nullptr));
    EXPECT_EQ(text, once);
  }
  // Only the string that held the secret changes: spacing, number spelling, key order and
  // the repeated key are kept.
  std::string pretty = "{\n  \"n\" : 1.50,\n  \"a\" : \"" + escaped + "\",\n  \"n\" : 2e0\n}";
  ASSERT_TRUE(r.RedactJsonText(&pretty, nullptr));
  EXPECT_EQ(pretty, "{\n  \"n\" : 1.50,\n  \"a\" : \"[REDACTED:sk-api-key]\",\n  \"n\" : 2e0\n}");
}

TEST(RedactRulesTest, SecretLookingEnvironmentValuesAreLiterals) {
  EXPECT_TRUE(RuleSet::NameLooksSecret("OPENAI_API_KEY"));
  EXPECT_TRUE(RuleSet::NameLooksSecret("GITHUB_TOKEN"));
  EXPECT_TRUE(RuleSet::NameLooksSecret("db_password"));
  EXPECT_TRUE(RuleSet::NameLooksSecret("AWS_SECRET_ACCESS_KEY"));
  EXPECT_TRUE(RuleSet::NameLooksSecret("GOOGLE_APPLICATION_CREDENTIALS"));
  EXPECT_TRUE(RuleSet::NameLooksSecret("MYAPIKEY"));
  EXPECT_FALSE(RuleSet::NameLooksSecret("PATH"));
  EXPECT_FALSE(RuleSet::NameLooksSecret("MAX_TOKENS"));
  EXPECT_FALSE(RuleSet::NameLooksSecret("KEYBOARD_LAYOUT"));
  EXPECT_FALSE(RuleSet::NameLooksSecret("SSH_AUTH_SOCK"));

  RuleSet rules = RuleSet::Empty();
  std::string a = "DEPLOY_PASSWORD=plain words anywhere", b = "PATH=/usr/bin:/bin",
              c = "SHORT_TOKEN=abc", d = "PIN_SECRET=12345678";
  char* env[] = {a.data(), b.data(), c.data(), d.data(), nullptr};
  rules.AddSecretEnvironment(env);
  ASSERT_EQ(rules.literals().size(), 1u);  // short and all-digit values are not literals
  EXPECT_EQ(rules.literals()[0].name, "env:DEPLOY_PASSWORD");
  auto r = Redactor::Create(rules);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Redacted(*r, "he said plain words anywhere, twice: plain words anywhere"),
            "he said [REDACTED:env:DEPLOY_PASSWORD], twice: [REDACTED:env:DEPLOY_PASSWORD]");
}

TEST(RedactRulesTest, RulesFileAddsPatternsAndErrorsNameFileAndLine) {
  trace::testing::TempDir dir;
  std::string path = dir.file("rules.txt");
  std::ofstream(path) << "# our own shapes\n\ncustomer-id CUST-[0-9]{6}\n"
                         "internal-url (?<secret>intranet\\.example\\.com/[a-z]+)\n";
  RuleSet rules = RuleSet::Defaults();
  ASSERT_TRUE(rules.AddRulesFile(path).ok());
  auto r = Redactor::Create(rules);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Redacted(*r, "ticket for CUST-123456 at https://intranet.example.com/wiki"),
            "ticket for [REDACTED:customer-id] at https://[REDACTED:internal-url]");

  std::ofstream(path) << "good [a-z]+\nbroken (unclosed\n";
  RuleSet bad = RuleSet::Defaults();
  Status st = bad.AddRulesFile(path);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path + ":2: "), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("bad regex at offset"), std::string::npos) << st.message();

  std::ofstream(path) << "lonely-name\n";
  st = RuleSet::Defaults().AddRulesFile(path);
  EXPECT_NE(st.message().find(path + ":1: expected 'NAME REGEX'"), std::string::npos)
      << st.message();
  st = RuleSet::Defaults().AddRulesFile(dir.file("missing.txt"));
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("missing.txt"), std::string::npos);
}

TEST(RedactRulesTest, BytesThatAreNotUtf8AreStillScanned) {
  Redactor r = Defaults();
  std::string text = std::string("\xff\xfe garbage ") + "AKIAIOSFODNN7EXAMPLE" + " \xc3";
  std::string out = Redacted(r, text);
  EXPECT_EQ(out, std::string("\xff\xfe garbage ") + "[REDACTED:aws-access-key-id]" + " \xc3");
}

proto::Event Call(uint64_t seq, const std::string& prompt, const std::string& output) {
  proto::Event e;
  e.set_seq(seq);
  proto::LlmCall* c = e.mutable_llm_call();
  c->set_request_json(
      nlohmann::json{{"messages", {{{"role", "user"}, {"content", prompt}}}}}.dump());
  c->set_rendered_prompt("<|user|>" + prompt);
  for (int i = 0; i < 5; ++i) c->add_prompt_token_ids(100 + i);
  c->set_output_text(output);
  c->set_response_json(nlohmann::json{{"choices", {{{"message", {{"content", output}}}}}}}.dump());
  for (int i = 0; i < 3; ++i) {
    c->add_token_ids(7 + i);
    c->add_logits_digests(0x1234 + i);
    c->add_logits(1.5f);
    c->add_logprobs(-0.1f);
    c->add_runner_up_ids(9);
    c->add_runner_up_logits(1.0f);
  }
  return e;
}

TEST(RedactEventTest, TokenIdsGoWithRedactedTextAndOnlyThere) {
  Redactor r = Defaults();
  const std::string key = "sk-proj-4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2";
  proto::Event in_prompt = Call(3, "my key is " + key, "ok");
  proto::Event in_output = Call(5, "what is the key?", "it is " + key);
  proto::Event clean = Call(7, "hello", "hi");
  RedactionReport report;
  r.RedactEvent(&in_prompt, &report);
  r.RedactEvent(&in_output, &report);
  r.RedactEvent(&clean, &report);

  EXPECT_EQ(in_prompt.llm_call().prompt_token_ids_size(), 0);
  EXPECT_EQ(in_prompt.llm_call().token_ids_size(), 3);  // the output had no secret
  EXPECT_EQ(in_output.llm_call().prompt_token_ids_size(), 5);
  EXPECT_EQ(in_output.llm_call().token_ids_size(), 0);
  EXPECT_EQ(in_output.llm_call().logits_digests_size(), 0);
  EXPECT_EQ(in_output.llm_call().runner_up_logits_size(), 0);
  EXPECT_EQ(clean.llm_call().prompt_token_ids_size(), 5);
  EXPECT_EQ(clean.llm_call().token_ids_size(), 3);
  EXPECT_EQ(report.prompt_tokens_removed, std::vector<uint64_t>{3});
  EXPECT_EQ(report.sampled_tokens_removed, std::vector<uint64_t>{5});

  std::set<std::string> fields;
  for (const auto& f : report.fields) fields.insert(f.where + " " + f.field);
  EXPECT_EQ(fields,
            (std::set<std::string>{"seq 3 llm_call.request_json", "seq 3 llm_call.rendered_prompt",
                                   "seq 5 llm_call.output_text", "seq 5 llm_call.response_json"}));
  for (const proto::Event* e : {&in_prompt, &in_output}) {
    std::string bytes = e->SerializeAsString();
    EXPECT_EQ(bytes.find(key), std::string::npos);
    EXPECT_FALSE(nlohmann::json::parse(e->llm_call().request_json()).is_discarded());
    EXPECT_FALSE(nlohmann::json::parse(e->llm_call().response_json()).is_discarded());
  }
  EXPECT_EQ(report.replacements(), 4);
  EXPECT_EQ(report.RuleTotals()["sk-api-key"], 4);
}

TEST(RedactEventTest, HeaderSecretsAreRedactedAndNamedByField) {
  Redactor r = Defaults();
  proto::RunHeader h;
  h.add_argv("python3");
  h.add_argv("agent.py");
  h.add_argv("--api-key=ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5");
  (*h.mutable_env())["LANG"] = "C.UTF-8";
  (*h.mutable_env())["SERVICE_TOKEN"] = "abc";  // secret by name, however short
  (*h.mutable_attributes())["upstream"] = "https://user:pa55word-xyz@proxy.example.com/v1";
  RedactionReport report;
  r.RedactHeader(&h, &report);
  EXPECT_EQ(h.argv(2), "--api-key=[REDACTED:github-token]");
  EXPECT_EQ(h.env().at("LANG"), "C.UTF-8");
  EXPECT_EQ(h.env().at("SERVICE_TOKEN"), "[REDACTED:env-name]");
  EXPECT_EQ(h.attributes().at("upstream"),
            "https://user:[REDACTED:url-password]@proxy.example.com/v1");
  std::set<std::string> fields;
  for (const auto& f : report.fields) fields.insert(f.where + " " + f.field);
  EXPECT_EQ(fields, (std::set<std::string>{"header argv[2]", "header env[SERVICE_TOKEN].value",
                                           "header attributes[upstream].value"}));
}

TEST(RedactEventTest, EveryStringAndBytesFieldOfEveryKindIsScanned) {
  Redactor r = Defaults();
  const std::string key = "AKIAIOSFODNN7EXAMPLE";
  std::vector<proto::Event> events(6);
  events[0].mutable_tool_call()->set_arguments_json("{\"k\":\"" + key + "\"}");
  events[1].mutable_tool_result()->set_content("result " + key);
  events[2].mutable_context_chunk()->set_content("chunk " + key);
  events[3].mutable_template_var()->set_value(key);
  events[4].mutable_output()->set_data("stdout " + key + "\n");
  events[5].mutable_note()->set_data_json("{\"" + key + "\":1}");  // even a JSON key
  RedactionReport report;
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].set_seq(i + 1);
    r.RedactEvent(&events[i], &report);
    EXPECT_EQ(events[i].SerializeAsString().find(key), std::string::npos) << i;
  }
  EXPECT_EQ(report.fields.size(), events.size());
  EXPECT_EQ(events[4].output().data(), "stdout [REDACTED:aws-access-key-id]\n");
}

}  // namespace
}  // namespace trace::redact
