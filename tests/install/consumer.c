/* SPDX-License-Identifier: MIT */
/* A program built against an installed rill: prints the device count. */
#include <stdio.h>

#include <rill.h>

int main(void) {
    int n = 0;
    if (rill_device_count(&n) != RILL_OK || n < 1) {
        fprintf(stderr, "consumer: %s\n", rill_last_error());
        return 1;
    }
    printf("devices: %d\n", n);
    return rill_shutdown() == RILL_OK ? 0 : 1;
}
