/* dre_cli.c: `wanopt dre encode|decode|stats --store DIR`. */
#include <stdio.h>

#include "cmd.h"

int px_cmd_dre(int argc, char **argv)
{
	fprintf(stderr, "wanopt dre: not built yet\n");
	return 1;
}
