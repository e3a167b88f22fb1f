/* unit_reply.c: the server's text plumbing without HTTP (ctest server_reply, label unit, so the
 * sanitizer run covers it): src/server/reply.c (UTF-8 joined across pieces, stop strings held back
 * and cut, <think> / <tool_call> split by src/text's chat parser whatever the piece boundaries) and src/server/json_check.c
 * (field paths for invalid UTF-8 and deep nesting). Every case is fed twice: whole, and one byte
 * per piece, which must give the same events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_check.h"
#include "server/reply.h"
#include "test.h"

typedef struct events {
    char reasoning[512], content[512], calls[512];
    int n_calls;
} events;

static void on_event(void *ctx, sv_event kind, const char *text, size_t len, const sv_tool_call *call) {
    events *e = ctx;
    char *dst = kind == SV_EVENT_REASONING ? e->reasoning : e->content;
    if (kind == SV_EVENT_TOOL_CALL) {
        snprintf(e->calls + strlen(e->calls), sizeof e->calls - strlen(e->calls), "%s%s", call->name, call->arguments);
        e->n_calls++;
        return;
    }
    strncat(dst, text, len);
}

/* Runs text through a reply (whole or byte by byte); returns whether a stop string matched. */
static int run(const char *prefix, const char *text, const char *const *stops, int flags, int bytewise, events *e) {
    memset(e, 0, sizeof *e);
    sv_reply *r = sv_reply_new(stops, flags, on_event, e);
    sv_reply_prefix(r, prefix);
    int stopped = 0;
    size_t n = strlen(text);
    for (size_t i = 0; i < n && !stopped; i += bytewise ? 1 : n) stopped = sv_reply_feed(r, text + i, bytewise ? 1 : n);
    sv_reply_finish(r);
    sv_reply_free(r);
    return stopped;
}

static void expect(const char *name, const char *prefix, const char *text, const char *const *stops, int flags,
                   const char *reasoning, const char *content, const char *calls, int stopped) {
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        events e;
        int s = run(prefix, text, stops, flags, bytewise, &e);
        CHECKF(!strcmp(e.reasoning, reasoning), "%s (%s): reasoning '%s', want '%s'", name, bytewise ? "bytes" : "whole", e.reasoning, reasoning);
        CHECKF(!strcmp(e.content, content), "%s (%s): content '%s', want '%s'", name, bytewise ? "bytes" : "whole", e.content, content);
        CHECKF(!strcmp(e.calls, calls), "%s (%s): calls '%s', want '%s'", name, bytewise ? "bytes" : "whole", e.calls, calls);
        CHECKF(s == stopped, "%s (%s): stopped %d, want %d", name, bytewise ? "bytes" : "whole", s, stopped);
    }
}

static void test_reply(void) {
    const int chat = SV_REPLY_REASONING, tools = SV_REPLY_REASONING | SV_REPLY_TOOLS;
    const char *const none[] = {NULL};
    expect("plain", "", "Hello, world", none, chat, "", "Hello, world", "", 0);
    expect("utf8 joined", "", "na\xc3\xafve \xe6\x97\xa5", none, 0, "", "na\xc3\xafve \xe6\x97\xa5", "", 0);
    expect("bad utf8 replaced", "", "a\xff" "b\xe6\x97", none, 0, "", "a\xef\xbf\xbd" "b\xef\xbf\xbd", "", 0);
    expect("surrogate replaced", "", "x\xed\xa0\x80y", none, 0, "", "x\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdy", "", 0);
    expect("think", "", "<think>\nsome thought\n</think>\n\nThe answer", none, chat, "some thought", "The answer", "", 0);
    expect("think opened by the prompt", "<think>\n", "thought\n</think>\n\nanswer", none, chat, "thought", "answer", "", 0);
    expect("unclosed think", "", "<think>\nstill thinking", none, chat, "still thinking", "", "", 0);
    expect("not a think tag", "", "<thin air", none, chat, "", "<thin air", "", 0);
    expect("raw keeps tags", "", "<think>x</think>", none, 0, "", "<think>x</think>", "", 0);
    const char *const stops[] = {"END", "c a", NULL};
    expect("stop cut", "", "abc abc", stops, 0, "", "ab", "", 1);
    expect("stop partial held then released", "", "abc_aXbEN", stops, 0, "", "abc_aXbEN", "", 0);
    expect("stop before a tag", "", "<think>r</think>ok END more", stops, chat, "r", "ok ", "", 1);
    expect("json tool call", "", "Sure.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
           none, tools, "", "Sure.", "get{\"city\":\"Oslo\"}", 0);
    expect("two tool calls", "", "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":\"{\\\"x\\\":1}\"}</tool_call>",
           none, tools, "", "", "a{}b{\"x\":1}", 0);
    expect("xml tool call", "", "<tool_call>\n<function=get>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
           none, tools, "", "", "get{\"city\":\"Oslo\",\"days\":3}", 0);
    expect("forced call prefix", "<tool_call>\n{\"name\": \"get\", \"arguments\": ", "{}}\n</tool_call>", none, tools, "", "", "get{}", 0);
    expect("malformed call is content", "", "<tool_call>{oops}</tool_call>", none, tools, "", "<tool_call>{oops}</tool_call>", "", 0);
    expect("unclosed complete call", "", "<tool_call>{\"name\":\"a\",\"arguments\":{}}", none, tools, "", "", "a{}", 0);
    expect("tools off: tag is content", "", "<tool_call>{\"name\":\"a\"}</tool_call>", none, chat, "", "<tool_call>{\"name\":\"a\"}</tool_call>", "", 0);
    expect("a later think is text", "", "Quote: <think>x</think> ok", none, chat, "", "Quote: <think>x</think> ok", "", 0);
    expect("think after whitespace", "", "\n <think>r</think>  a", none, chat, "r", "a", "", 0);
    expect("call without a name is content", "", "a <tool_call>{\"arguments\":{}}</tool_call>\n b", none, tools, "",
           "a<tool_call>{\"arguments\":{}}</tool_call>b", "", 0);
    expect("arguments not an object", "", "<tool_call>{\"name\":\"f\",\"arguments\":[1]}</tool_call>", none, tools, "",
           "<tool_call>{\"name\":\"f\",\"arguments\":[1]}</tool_call>", "", 0);
    expect("trailing space kept at the end", "", "x \n", none, tools, "", "x \n", "", 0);
    expect("json object answer", "<think>\n\n</think>\n\n{", "\"a\": \"<think>\"}", none, chat, "", "{\"a\": \"<think>\"}", "", 0);
}

static void test_json_check(void) {
    char param[128], msg[256];
    const char ok[] = "{\"a\": [1, {\"b\": \"\xc3\xa9\"}], \"c\": \"x\"}";
    CHECK(sv_json_check(ok, strlen(ok), 64, param, sizeof param, msg, sizeof msg) == 0);
    const char bad[] = "{\"model\": \"m\", \"messages\": [{\"role\": \"user\"}, {\"role\": \"user\", \"content\": \"a\xc3(\"}]}";
    CHECK(sv_json_check(bad, strlen(bad), 64, param, sizeof param, msg, sizeof msg) == -1);
    CHECKF(!strcmp(param, "messages[1].content"), "param '%s'", param);
    const char escaped[] = "{\"k\\\"ey\": \"\\u00e9\\\"\", \"z\": \"\xff\"}";
    CHECK(sv_json_check(escaped, strlen(escaped), 64, param, sizeof param, msg, sizeof msg) == -1);
    CHECKF(!strcmp(param, "z"), "param '%s'", param);
    char deep[300];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    deep[200] = 0;
    CHECK(sv_json_check(deep, 200, 64, param, sizeof param, msg, sizeof msg) == -1);
    CHECKF(strstr(msg, "deeper than 64") != NULL, "msg '%s'", msg);
    CHECK(sv_json_check(deep, 200, 128, param, sizeof param, msg, sizeof msg) == 0);
}

int main(void) {
    test_reply();
    test_json_check();
    return test_report("server_reply");
}
