/* test_audit.c - the audit an operator ships (issue 29): every envelope
 * carries its decision id once the audit leaves the process, a nested
 * call's record names its caller's as parent and carries the request's
 * id, clara_audit_reopen moves the records to a new file after a rotation
 * renamed the old one, and clara_telemetry_flush answers at once without
 * telemetry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clara.h"
#include "harness.h"

/* audit_nester runs the request in its arguments' "request" inside its
 * call and answers with the envelope it got. */
static int audit_nester(void *userdata, const char *arguments_json, clara_call *call) {
    char *request = NULL, *envelope;
    (void)userdata;
    if (clara_json_get(arguments_json, "request", &request, NULL) != CLARA_JSON_STRING) {
        clara_free_string(request);
        clara_call_error(call, "no request");
        return 1;
    }
    envelope = clara_call_evaluate(call, request);
    clara_free_string(request);
    clara_call_result(call, envelope);
    clara_free_string(envelope);
    return 0;
}

/* get returns the string at path of json (malloc'd; "" when missing). */
static char *get(const char *json, const char *path) {
    char *v = NULL;
    if (clara_json_get(json, path, &v, NULL) != CLARA_JSON_STRING) {
        clara_free_string(v);
        v = malloc(1);
        if (v) v[0] = '\0';
    }
    return v;
}

static int count_lines(const char *path, const char *needle) {
    char line[4096];
    int n = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (needle == NULL || strstr(line, needle) != NULL) n++;
    fclose(f);
    return n;
}

static char audit_path[64];

static void configure_audit(const char *path) {
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"audit\":{\"path\":\"%s\"}}", path);
    char *r = clara_configure(cfg);
    CHECK(r != NULL && strncmp(r, "{\"status\":\"success\"", 19) == 0);
    clara_free_string(r);
}

static void test_decision_ids_and_parents(void) {
    int fd;
    snprintf(audit_path, sizeof audit_path, "/tmp/clara_audit_XXXXXX");
    fd = mkstemp(audit_path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    CHECK_INT(clara_register_tool("{\"name\":\"audit_nester\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"request\":"
                                  "{\"type\":\"string\"}},\"required\":[\"request\"]},\"limits\":{\"timeout_ms\":30000}}",
                                  audit_nester, NULL, NULL),
              CLARA_OK);
    /* Without a sink, the envelope is as it always was. */
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"arguments\":{\"a\":1}}", "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"a\":1}}");
    configure_audit(audit_path);

    char *r = clara_evaluate("{\"tool\":\"audit_nester\",\"id\":\"c-1\",\"arguments\":{\"request\":"
                             "\"{\\\"tool\\\":\\\"echo\\\",\\\"arguments\\\":{\\\"x\\\":1}}\"}}");
    char *outer = get(r, "decision_id"), *inner = get(r, "result.decision_id");
    CHECK(outer[0] != '\0' && inner[0] != '\0' && strcmp(outer, inner) != 0);
    if (outer[0] == '\0' || inner[0] == '\0') fprintf(stderr, "    got %s\n", r);

    char *tail = clara_evaluate("{\"tool\":\"audit_tail\",\"arguments\":{\"n\":2}}");
    char *t0 = get(tail, "result.records.0.tool"), *d0 = get(tail, "result.records.0.decision_id");
    char *t1 = get(tail, "result.records.1.tool"), *d1 = get(tail, "result.records.1.decision_id");
    char *p1 = get(tail, "result.records.1.parent_id"), *id1 = get(tail, "result.records.1.id");
    CHECK_STR(t0, "audit_nester");
    CHECK_STR(d0, outer);
    CHECK_STR(t1, "echo");
    CHECK_STR(d1, inner);
    CHECK_STR(p1, outer); /* the nested call names its caller */
    CHECK_STR(id1, "c-1"); /* and the host's request it serves */
    /* The file has both records, with the same ids. */
    CHECK_INT(count_lines(audit_path, outer), 2); /* the caller's record, and its child's parent_id */
    CHECK_INT(count_lines(audit_path, inner), 1);
    free(t0), free(d0), free(t1), free(d1), free(p1), free(id1);
    clara_free_string(tail);
    free(outer), free(inner);
    clara_free_string(r);
    CHECK_INT(clara_unregister_tool("audit_nester"), CLARA_OK);
}

static void test_reopen_after_a_rotation(void) {
    char rotated[80];
    snprintf(rotated, sizeof rotated, "%s.1", audit_path);
    int before = count_lines(audit_path, NULL);
    CHECK(rename(audit_path, rotated) == 0);
    char *r = clara_evaluate("{\"tool\":\"echo\",\"arguments\":{\"when\":\"renamed\"}}");
    clara_free_string(r);
    CHECK_INT(clara_audit_reopen(), 0);
    r = clara_evaluate("{\"tool\":\"echo\",\"arguments\":{\"when\":\"reopened\"}}");
    clara_free_string(r);
    CHECK_INT(count_lines(rotated, NULL), before + 1); /* the record made before the reopen */
    CHECK_INT(count_lines(audit_path, NULL), 1);       /* the one after, in a new file */
    /* The tool does the same (its envelope has its decision id: the audit
     * leaves the process). */
    const char *reopened = "{\"status\":\"success\",\"tool\":\"audit_reopen\",\"result\":{\"reopened\":true},\"decision_id\":\"";
    r = clara_evaluate("{\"tool\":\"audit_reopen\",\"arguments\":{}}");
    CHECK(r != NULL && strncmp(r, reopened, strlen(reopened)) == 0);
    clara_free_string(r);
    configure_audit("");
    CHECK_INT(clara_audit_reopen(), 0); /* no file: nothing to do */
    CHECK_INT(clara_telemetry_flush(100), 0);
    unlink(audit_path);
    unlink(rotated);
}

void tests_audit(void) {
    test_decision_ids_and_parents();
    test_reopen_after_a_rotation();
}
