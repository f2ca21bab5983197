/* test_mcp.c - clara_mcp_listen under the [mcp] settings in force at each
 * call, spoken to over a plain socket: the token, loopback only, the
 * session cap (issue 25, findings 4 and 12). tests/mcp drives the full
 * protocol with the official SDKs. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "clara.h"
#include "harness.h"

#define INITIALIZE                                                                                               \
    "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"," \
    "\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}"

/* The port of a clara_mcp_listen answer ("http://127.0.0.1:PORT/mcp"), 0
 * when it is an error; frees the answer. */
static int listened_port(char *r) {
    char *url = NULL;
    int port = 0;
    if (r != NULL && clara_json_get(r, "result.url", &url, NULL) == CLARA_JSON_STRING) {
        const char *colon = strrchr(url, ':');
        if (colon != NULL) port = atoi(colon + 1);
    }
    clara_free_string(url);
    clara_free_string(r);
    return port;
}

/* POSTs an initialize to 127.0.0.1:port/mcp, with "Authorization: Bearer
 * token" when token is not NULL; returns the HTTP status (-1 on a socket
 * error) and copies the response (headers and body) into out. */
static int post_initialize(int port, const char *token, char *out, size_t outsize) {
    struct sockaddr_in sa;
    struct timeval tv = {30, 0};
    char req[1024], auth[128] = "";
    size_t got = 0;
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1;
    out[0] = '\0';
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    if (token != NULL) snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
    snprintf(req, sizeof req,
             "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
             "Accept: application/json, text/event-stream\r\n%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             port, auth, strlen(INITIALIZE), INITIALIZE);
    if (write(fd, req, strlen(req)) == (ssize_t)strlen(req)) {
        /* Until the server closes: an answer fits in out; the rest is dropped. */
        char sink[4096];
        while ((n = read(fd, got + 1 < outsize ? out + got : sink, got + 1 < outsize ? outsize - 1 - got : sizeof sink)) > 0)
            if (got + 1 < outsize) got += (size_t)n;
        out[got] = '\0';
        if (sscanf(out, "HTTP/1.1 %d", &status) != 1) status = -1;
    }
    close(fd);
    return status;
}

/* A listen takes the settings in force when it is called: a second listen
 * after allow_remote = false and a token must not serve as the first did. */
static void test_each_listen_takes_the_settings_in_force(void) {
    char resp[8192];
    int open_port, port;
    setenv("CLARA_TEST_MCP_TOKEN", "c-test-token-4711", 1);
    clara_free_string(clara_configure("[mcp]\nallow_remote = true\n"));
    open_port = listened_port(clara_mcp_listen("0.0.0.0:0"));
    CHECK(open_port > 0);
    clara_free_string(clara_configure("[mcp]\nallow_remote = false\ntoken_env = \"CLARA_TEST_MCP_TOKEN\"\n"));
    {
        char *r = clara_mcp_listen("0.0.0.0:0");
        CHECK_STR(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_mcp_listen: mcp: \\\"0.0.0.0:0\\\" "
                     "is not a loopback address; serving other hosts needs mcp.allow_remote = true\"}");
        clara_free_string(r);
    }
    port = listened_port(clara_mcp_listen("127.0.0.1:0"));
    CHECK(port > 0);
    CHECK_INT(post_initialize(port, NULL, resp, sizeof resp), 401);
    CHECK_INT(post_initialize(port, "a-guess", resp, sizeof resp), 401);
    CHECK_INT(post_initialize(port, "c-test-token-4711", resp, sizeof resp), 200);
    CHECK(strstr(resp, "\"serverInfo\":{\"name\":\"clara\"") != NULL);
    /* The first listener keeps what it started with (docs/mcp.md). */
    CHECK_INT(post_initialize(open_port, NULL, resp, sizeof resp), 200);
    clara_mcp_stop();
    CHECK_INT(post_initialize(port, "c-test-token-4711", resp, sizeof resp), -1);
    /* A token variable that is not set: nothing listens. */
    unsetenv("CLARA_TEST_MCP_TOKEN");
    {
        char *r = clara_mcp_listen("127.0.0.1:0");
        CHECK_STR(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_mcp_listen: mcp.token_env names "
                     "CLARA_TEST_MCP_TOKEN, which is not set\"}");
        clara_free_string(r);
    }
    clara_free_string(clara_reset());
}

/* Sessions are capped: the third initialize of max_sessions = 2 gets 503
 * and a JSON-RPC error saying why. */
static void test_session_cap(void) {
    char resp[8192];
    int port;
    clara_free_string(clara_configure("[mcp]\nmax_sessions = 2\n"));
    port = listened_port(clara_mcp_listen("127.0.0.1:0"));
    CHECK(port > 0);
    CHECK_INT(post_initialize(port, NULL, resp, sizeof resp), 200);
    CHECK(strstr(resp, "Mcp-Session-Id: mcp-") != NULL);
    CHECK_INT(post_initialize(port, NULL, resp, sizeof resp), 200);
    CHECK_INT(post_initialize(port, NULL, resp, sizeof resp), 503);
    CHECK(strstr(resp, "{\"error\":{\"code\":-32000,\"message\":\"too many MCP sessions: 2 are open, the most "
                       "mcp.max_sessions (2) allows; try again once one has ended\"},\"id\":7,\"jsonrpc\":\"2.0\"}") != NULL);
    /* Stopping ends them all: a new listener has room again. */
    clara_mcp_stop();
    port = listened_port(clara_mcp_listen("127.0.0.1:0"));
    CHECK_INT(post_initialize(port, NULL, resp, sizeof resp), 200);
    clara_mcp_stop();
    clara_free_string(clara_reset());
}

void tests_mcp(void) {
    test_each_listen_takes_the_settings_in_force();
    test_session_cap();
}
