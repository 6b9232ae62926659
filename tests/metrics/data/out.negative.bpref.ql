bpref                 	q1	0.0000
bpref                 	q2	0.0000
bpref                 	q3	0.0000
bpref                 	q4	0.0000
bpref                 	q5	0.0000
bpref                 	q6	0.0000
bpref                 	all	0.0000
