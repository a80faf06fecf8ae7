! Cost of one Fortran statement, for the FORTRAN layer's overhead figures:
!   fortran_overhead N    times N unformatted one-value WRITEs to a stream file
!                         and N formatted one-line WRITEs to a text file, in
!                         /dev/null-like scratch files of the working directory,
!                         and prints "unformatted NS formatted NS" per statement
program fortran_overhead
  implicit none
  integer(8) :: t0, t1, rate
  integer :: n, i, u
  character(len=16) :: arg
  real(8) :: x, unf, fmt
  call get_command_argument(1, arg)
  read(arg, *) n
  x = 1.5d0
  open(newunit=u, file='overhead.bin', access='stream', form='unformatted', status='replace')
  call system_clock(t0, rate)
  do i = 1, n
    write(u) x
  end do
  call system_clock(t1)
  close(u, status='delete')
  unf = real(t1 - t0, 8) / real(rate, 8) / n * 1d9
  open(newunit=u, file='overhead.txt', status='replace')
  call system_clock(t0)
  do i = 1, n
    write(u, '(ES24.16)') x
  end do
  call system_clock(t1)
  close(u, status='delete')
  fmt = real(t1 - t0, 8) / real(rate, 8) / n * 1d9
  print '(A,F10.1,A,F10.1)', 'unformatted', unf, ' formatted', fmt
end program fortran_overhead
