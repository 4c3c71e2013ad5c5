/* fuzz_allow.c: libFuzzer harness for an ALLOW frame's payload as an edge
 * reads it (conf_acl_from_wire): any bytes are refused cleanly or read into a
 * list that then answers queries. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[128];
	struct conf_acl *a = conf_acl_from_wire(data, size, err, sizeof err);
	if (!a) {
		if (!err[0])
			abort(); /* a refusal says why */
		return 0;
	}
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(80) };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(443) };
	if (size >= 6)
		memcpy(&s4.sin_addr, data + 2, 4);
	if (size >= 18)
		memcpy(&s6.sin6_addr, data + 2, 16);
	conf_acl_match(a, (struct sockaddr *)&s4, size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 80);
	conf_acl_match(a, (struct sockaddr *)&s6, 443);
	conf_acl_match(a, NULL, 1);
	conf_acl_count(a);
	conf_acl_free(a);
	return 0;
}
