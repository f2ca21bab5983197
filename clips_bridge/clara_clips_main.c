/* SPDX-License-Identifier: MIT */
/*
 * clara-clips - a CLIPS shell with Clara's functions built in.
 *
 * usage: clara-clips [--config PATH] [--evaluator NAME] [--test-mode] [--verbose] [CLIPS options]
 *
 *   --config PATH     apply a Clara configuration file (TOML or JSON)
 *   --evaluator NAME  the tool of simple-form requests, e.g. echo
 *   --test-mode       Clara's test mode (test_mode = true): tools that reach
 *                     the network, write files or run programs are skipped
 *   --verbose         a status line on stderr for each tool a model calls
 *                     and each question it asks the user:
 *                     "↪ tool: NAME(ARGS…)", "✔ tool result received: NAME (34ms)",
 *                     "✗ tool NAME failed: CODE (34ms)"
 *   -f FILE.clp       run the commands in FILE (batch), as clips -f does
 *   -f2 FILE          the same, without echoing the commands
 *   -l FILE           load the constructs in FILE
 *   -h, --help        this text
 *   --version         Clara's and CLIPS's versions
 *
 * --config, --evaluator and --test-mode apply in the order given. Without
 * -f, CLIPS's own interactive command loop runs. When standard input ends
 * (Ctrl-D, or the end of a pipe or of /dev/null after a batch file),
 * clara-clips exits with status 0 instead of waiting forever as the
 * plain clips shell does. Exit status: what (exit N) gives, 0 at the end of
 * input, or 2 when an option or the configuration is invalid.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clips.h"

#include "clara.h"
#include "clara_clips.h"

static const char usage[] =
    "usage: clara-clips [--config PATH] [--evaluator NAME] [--test-mode] [--verbose] [-f FILE.clp | -f2 FILE | -l FILE]...\n"
    "       clara-clips --help | --version\n"
    "\n"
    "  --config PATH     apply a Clara configuration file (TOML or JSON)\n"
    "  --evaluator NAME  the tool of simple-form requests, e.g. echo\n"
    "  --test-mode       Clara's test mode (test_mode = true): tools that reach the network,\n"
    "                    write files or run programs are skipped\n"
    "  -f FILE.clp       run the commands in FILE, echoing them, as clips -f does\n"
    "  -f2 FILE          the same, without echoing the commands\n"
    "  -l FILE           load the constructs in FILE\n"
    "  --verbose         a status line on stderr for each tool a model calls\n"
    "  -h, --help        this text\n"
    "  --version         Clara's and CLIPS's versions\n";

/* The largest configuration file read: Clara's own bound on one
 * (core.MaxConfigFile, bin/clara --config, CLARA_CONFIG). */
#define MAX_CONFIG_FILE (16L << 20)

/* What a file that is not a regular one is, for the message. */
static const char *file_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a named pipe";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    return "not a regular file";
}

/* Reads a whole regular file of at most MAX_CONFIG_FILE bytes into a
 * malloc'd NUL-terminated string, as Clara reads the files it is named
 * (core/fsread): a named pipe or a device is refused, never waited on nor
 * read without end. On failure returns NULL with the reason in why. */
static char *read_file(const char *path, char *why, size_t why_len) {
    struct stat st;
    char *text = NULL;
    size_t len = 0, cap;
    int fd;
    /* Refused before the open, which alone can have effects on a device. */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(why, why_len, "%s is %s, not a regular file", path, file_kind(st.st_mode));
        return NULL;
    }
    fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_len, "%s is %s, not a regular file", path, file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    if (st.st_size > MAX_CONFIG_FILE) {
        snprintf(why, why_len, "%s is %lld bytes, over the %ld-byte limit", path, (long long)st.st_size,
                 MAX_CONFIG_FILE);
        close(fd);
        return NULL;
    }
    cap = (size_t)st.st_size + 4096;
    text = malloc(cap);
    while (text != NULL) {
        ssize_t n = read(fd, text + len, cap - len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            snprintf(why, why_len, "%s", strerror(errno));
            free(text);
            text = NULL;
            break;
        }
        if (n == 0) {
            text[len] = '\0';
            break;
        }
        len += (size_t)n;
        if (len > (size_t)MAX_CONFIG_FILE) {
            snprintf(why, why_len, "%s grew past the %ld-byte limit while it was read", path, MAX_CONFIG_FILE);
            free(text);
            text = NULL;
            break;
        }
        if (cap - len < 4096) {
            char *grown = realloc(text, cap *= 2);
            if (grown == NULL) free(text); /* never hand on part of a file */
            text = grown;
        }
    }
    if (text == NULL && why[0] == '\0') snprintf(why, why_len, "out of memory");
    close(fd);
    return text;
}

/* Applies configuration text; prints Clara's message and returns 0 when it
 * is refused. */
static int configure(const char *text, const char *what) {
    char *response = clara_configure(text), *message = NULL, *status = NULL;
    int ok;
    if (response == NULL) {
        fprintf(stderr, "clara-clips: %s: out of memory\n", what);
        return 0;
    }
    clara_json_get(response, "status", &status, NULL);
    ok = status != NULL && strcmp(status, "success") == 0;
    if (!ok) {
        clara_json_get(response, "message", &message, NULL);
        fprintf(stderr, "clara-clips: %s: %s\n", what, message ? message : response);
    }
    clara_free_string(message);
    clara_free_string(status);
    clara_free_string(response);
    return ok;
}

/* A router for "stdin" below CLIPS's batch router: batch files are read
 * first, then standard input, and its end ends the program. Other routers
 * (priority 0 for files) stay below it. */
#define STDIN_ROUTER_PRIORITY 10

#if defined(UNBOUNDED) && defined(UDFHasNextArgument) /* CLIPS 6.4x */
static bool stdin_query(Environment *env, const char *name, void *context) {
    (void)env, (void)context;
    return strcmp(name, STDIN) == 0;
}
static int stdin_read(Environment *env, const char *name, void *context) {
    int ch = getc(stdin);
    (void)name, (void)context;
    if (ch == EOF) {
        WriteString(env, STDOUT, "\n");
        ExitRouter(env, EXIT_SUCCESS);
    }
    return ch;
}
static int stdin_unread(Environment *env, const char *name, int ch, void *context) {
    (void)env, (void)name, (void)context;
    return ungetc(ch, stdin);
}
/* CLIPS 6.4 writes errors to stderr (unbuffered) and the rest to stdout
 * (buffered when it is not a terminal): flushing stdout before each error
 * keeps them in the order CLIPS wrote them, as in a terminal, when both go
 * to one file or pipe. */
static bool stderr_query(Environment *env, const char *name, void *context) {
    (void)env, (void)context;
    return strcmp(name, STDERR) == 0;
}
static void stderr_write(Environment *env, const char *name, const char *text, void *context) {
    (void)env, (void)name, (void)context;
    fflush(stdout);
    fputs(text, stderr);
}
static int add_routers(void *env) {
    return AddRouter((Environment *)env, "clara-stdin", STDIN_ROUTER_PRIORITY, stdin_query, NULL, stdin_read,
                     stdin_unread, NULL, NULL) &&
           AddRouter((Environment *)env, "clara-stderr", STDIN_ROUTER_PRIORITY, stderr_query, stderr_write, NULL,
                     NULL, NULL, NULL);
}
#else /* CLIPS 6.30 (which writes errors to stdout) */
static int stdin_query(void *env, const char *name) {
    (void)env;
    return strcmp(name, "stdin") == 0;
}
static int stdin_read(void *env, const char *name) {
    int ch = getc(stdin);
    (void)name;
    if (ch == EOF) {
        EnvPrintRouter(env, WPROMPT, "\n");
        EnvExitRouter(env, EXIT_SUCCESS);
    }
    return ch;
}
static int stdin_unread(void *env, int ch, const char *name) {
    (void)env, (void)name;
    return ungetc(ch, stdin);
}
static int add_routers(void *env) {
    return EnvAddRouter(env, "clara-stdin", STDIN_ROUTER_PRIORITY, stdin_query, NULL, stdin_read, stdin_unread,
                        NULL);
}
#endif

/* Reads a field of an event; "" when missing. Free with clara_free_string. */
static char *event_field(const char *event, const char *path) {
    char *text = NULL;
    if (clara_json_get(event, path, &text, NULL) <= 0 || text == NULL) {
        clara_free_string(text);
        text = malloc(1);
        if (text != NULL) text[0] = '\0';
    }
    return text;
}

/* --verbose: the seed's status lines for the tools a model calls. */
static void status_line(void *userdata, const char *event) {
    char *kind = event_field(event, "event"), *tool = event_field(event, "tool");
    (void)userdata;
    if (kind != NULL && tool != NULL && strcmp(kind, "tool_call") == 0) {
        char *args = event_field(event, "arguments");
        if (args != NULL && strlen(args) > 60) strcpy(args + 57, "...");
        fprintf(stderr, "\xe2\x86\xaa tool: %s(%s)\n", tool, args ? args : "");
        clara_free_string(args);
    } else if (kind != NULL && tool != NULL && strcmp(kind, "tool_result") == 0) {
        char *status = event_field(event, "status"), *ms = event_field(event, "duration_ms");
        double d = ms ? strtod(ms, NULL) : 0;
        /* Below a millisecond, microseconds: "(0ms)" told nothing. */
        char took[32];
        if (d < 1) snprintf(took, sizeof took, "%.0f\xc2\xb5s", d * 1000);
        else snprintf(took, sizeof took, "%.0fms", d);
        if (status != NULL && strcmp(status, "success") == 0)
            fprintf(stderr, "\xe2\x9c\x94 tool result received: %s (%s)\n", tool, took);
        else
            fprintf(stderr, "\xe2\x9c\x97 tool %s failed: %s (%s)\n", tool, status ? status : "", took);
        clara_free_string(status);
        clara_free_string(ms);
    } else if (kind != NULL && strcmp(kind, "input_required") == 0) {
        char *prompt = event_field(event, "prompt");
        fprintf(stderr, "? the user is asked: %s\n", prompt ? prompt : "");
        clara_free_string(prompt);
    }
    fflush(stderr);
    clara_free_string(kind);
    clara_free_string(tool);
}

static int valid_tool_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

int main(int argc, char *argv[]) {
    char **clips_argv = calloc((size_t)argc + 1, sizeof *clips_argv);
    int clips_argc = 0, i;
    void *env;
    if (clips_argv == NULL) return 2;
    clips_argv[clips_argc++] = argv[0];
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("clara-clips %s (Clara %s, CLIPS %s)\n", CLARA_VERSION, clara_version(), VERSION_STRING);
            return 0;
        } else if (strcmp(a, "--config") == 0 || strcmp(a, "--evaluator") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "clara-clips: %s needs a value\n%s", a, usage);
                return 2;
            }
            if (a[2] == 'c') {
                char why[512] = "";
                char *text = read_file(argv[++i], why, sizeof why);
                int ok;
                if (text == NULL) {
                    fprintf(stderr, "clara-clips: cannot read %s: %s\n", argv[i], why);
                    return 2;
                }
                ok = configure(text, argv[i]);
                free(text);
                if (!ok) return 2;
            } else {
                char json[128];
                const char *name = argv[++i];
                if (!valid_tool_name(name)) {
                    fprintf(stderr, "clara-clips: --evaluator: %s is not a tool name\n", name);
                    return 2;
                }
                snprintf(json, sizeof json, "{\"default_evaluator\":\"%s\"}", name);
                if (!configure(json, "--evaluator")) return 2;
            }
        } else if (strcmp(a, "--verbose") == 0) {
            clara_clips_forward_events(status_line, NULL);
        } else if (strcmp(a, "--test-mode") == 0) {
            if (!configure("test_mode = true", "--test-mode")) return 2;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "-f2") == 0 || strcmp(a, "-l") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "clara-clips: %s needs a file\n%s", a, usage);
                return 2;
            }
            clips_argv[clips_argc++] = argv[i];
            clips_argv[clips_argc++] = argv[++i];
        } else {
            fprintf(stderr, "clara-clips: unknown option %s\n%s", a, usage);
            return 2;
        }
    }
    env = CreateEnvironment();
    if (env == NULL || clara_clips_register(env) != CLARA_OK || !add_routers(env)) {
        fprintf(stderr, "clara-clips: cannot set up CLIPS\n");
        return 2;
    }
    RerouteStdin(env, clips_argc, clips_argv);
    CommandLoop(env);
    return 0;
}
