#include <stdio.h>
#include <clara.h>

int main(void) {
    char *reply = clara_evaluate("{\"tool\":\"echo\",\"arguments\":{\"message\":\"hello\"}}");
    printf("%s\n", reply);
    clara_free_string(reply);
    return 0;
}
