/* Fatal signals under write-behind (signals.c): pending writes land before
 * the program's own disposition ends the process. */
#ifndef IOPILOT_SIGNALS_H
#define IOPILOT_SIGNALS_H

/* Once write-behind is on (from iop_behind_init). */
void iop_signals_init(void);

#endif
