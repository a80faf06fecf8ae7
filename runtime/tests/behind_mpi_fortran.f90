! behind_mpi.c in Fortran: rank 0 writes a 32 MiB file with one WRITE and,
! the file still open, tells rank 1 by an MPI message that it is there;
! rank 1 asks its size (INQUIRE).  The message is, in turn, MPI_SEND, MPI_BCAST,
! MPI_ALLREDUCE and MPI_BARRIER.  Run plain and with write-behind: the
! same sizes.
!     mpirun -np 2 behind_mpi_fortran DIR
program behind_mpi_fortran
  use mpi
  implicit none
  character(len=9), parameter :: how(4) = [character(len=9) :: 'send', 'bcast', 'allreduce', &
                                           'barrier']
  integer, parameter :: n = 32 * 1024 * 1024
  character(len=1), allocatable :: buf(:)
  character(len=4096) :: dir, path
  integer :: ierr, rank, k, u, token, total
  integer(8) :: sz

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, dir)
  allocate (buf(n))
  buf = 'r'
  do k = 1, 4
    path = trim(dir) // '/' // trim(how(k)) // '.dat'
    token = 0
    if (rank == 0) then
      open (newunit=u, file=trim(path), access='stream', form='unformatted', status='replace')
      write (u) buf
      flush (u)
      token = 1
      call publish(k)
      call MPI_Recv(token, 1, MPI_INTEGER, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
      close (u)
    else
      call publish(k)
      if (rank == 1) then
        inquire (file=trim(path), size=sz)
        write (*, '(a,a,i0)') trim(how(k)), ': rank 1 sees ', sz
        flush (6)
        call MPI_Send(token, 1, MPI_INTEGER, 0, 8, MPI_COMM_WORLD, ierr)
      end if
    end if
  end do
  call MPI_Finalize(ierr)

contains

  subroutine publish(k)
    integer, intent(in) :: k
    select case (k)
    case (1)
      if (rank == 0) call MPI_Send(token, 1, MPI_INTEGER, 1, 7, MPI_COMM_WORLD, ierr)
      if (rank == 1) call MPI_Recv(token, 1, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, &
                                   MPI_STATUS_IGNORE, ierr)
    case (2)
      call MPI_Bcast(token, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    case (3)
      call MPI_Allreduce(MPI_IN_PLACE, token, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    case (4)
      call MPI_Barrier(MPI_COMM_WORLD, ierr)
    end select
  end subroutine publish
end program behind_mpi_fortran
